"""Every script's entry point: user errors as one line, tracebacks for bugs, `--help` listing every
flag the script reads, and no TensorFlow start-up messages before the script's own first line."""
import os
import subprocess
import sys

import numpy as np
import pytest

from modeling.config import BertConfig
from tests.conftest import REPO_ROOT
from tests.script_errors import TRACEBACK, assert_user_error
from training.run_guards import OutputDirInUseError
from utils.user_errors import error_line, is_user_error, report_user_errors

_ENV = {key: value for key, value in os.environ.items()
        if key not in ("TF_CPP_MIN_LOG_LEVEL", "BERT_TRACEBACK")}


def _raised(function, *args) -> BaseException:
    try:
        function(*args)
    except Exception as error:  # noqa: BLE001
        return error
    raise AssertionError("nothing was raised")


def test_the_projects_value_errors_and_the_systems_refusals_are_the_users():
    bad_config = _raised(BertConfig.from_dict, {"vocab_size": 0})
    assert is_user_error(bad_config)
    assert is_user_error(_raised(open, "/nonexistent/file.txt"))
    assert is_user_error(OutputDirInUseError("in use"))


def test_errors_raised_inside_libraries_or_of_other_types_are_bugs():
    assert not is_user_error(_raised(np.reshape, np.zeros(3), (2, 2)))
    assert not is_user_error(_raised(dict().__getitem__, "key"))
    assert not is_user_error(ValueError("never raised, so raised by no one"))


def test_a_user_error_becomes_one_line_and_status_one(capsys):
    def main(argv):
        BertConfig.from_dict({"vocab_size": 0})

    with pytest.raises(SystemExit) as stopped:
        report_user_errors(main, verbose=lambda: False)([])
    assert stopped.value.code == 1
    assert capsys.readouterr().err == error_line(_raised(BertConfig.from_dict,
                                                         {"vocab_size": 0})) + "\n"


def test_verbose_and_bugs_keep_the_exception():
    def main(argv):
        BertConfig.from_dict({"vocab_size": 0})

    with pytest.raises(ValueError):
        report_user_errors(main, verbose=lambda: True)([])
    with pytest.raises(KeyError):
        report_user_errors(lambda argv: {}["missing"], verbose=lambda: False)([])


def _script(*args, env=None):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                          cwd=REPO_ROOT, env=env or _ENV, timeout=300)


@pytest.mark.slow
def test_a_script_prints_one_line_unless_asked_for_the_traceback(tmp_path):
    args = ["predict_text.py", "--task=embed", f"--model={tmp_path}/none",
            f"--input_file={tmp_path}/lines.txt", f"--output_file={tmp_path}/out.jsonl"]
    quiet = _script(*args)
    assert quiet.returncode == 1
    assert_user_error(quiet.stderr, f"{tmp_path}/lines.txt")
    verbose = _script(*args, "--verbose")
    assert verbose.returncode == 1 and TRACEBACK in verbose.stderr
    by_variable = _script(*args, env={**_ENV, "BERT_TRACEBACK": "1"})
    assert by_variable.returncode == 1 and TRACEBACK in by_variable.stderr


@pytest.mark.slow
def test_help_lists_the_shared_flags_and_tensorflow_starts_quietly():
    result = _script("run_classifier.py", "--help")  # absl's --help exits with status 1
    listed = result.stdout.split("\nabsl.", 1)[0]  # the script's own section, before absl's
    for flag in ("--task_name", "--vocab_file", "--bert_config_file", "--init_checkpoint",
                 "--max_seq_length", "--do_train", "--learning_rate", "--verbose"):
        assert f"  {flag}" in listed or f"  --[no]{flag[2:]}" in listed, flag
    for noise in ("oneDNN", "cuda drivers", "cuInit", "InitializeLog", "cpu_feature_guard"):
        assert noise not in result.stderr, result.stderr
