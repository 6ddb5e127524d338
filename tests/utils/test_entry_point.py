"""Every script's entry point: user errors as one line, tracebacks for bugs, `--help` listing every
flag the script reads, and no TensorFlow start-up messages before the script's own first line."""
import os
import subprocess
import sys

import numpy as np
import pytest

from modeling.config import BertConfig
from tests.support.paths import REPO_ROOT
from tests.support.script_errors import TRACEBACK, assert_user_error
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


# Loaded by every Python process started with its folder on PYTHONPATH (a spawned worker too;
# a forked one inherits it): records each import of TensorFlow or Keras as it happens, and the
# TensorFlow and Keras modules loaded when a worker is handed a chunk and when a process exits.
_WATCH_IMPORTS = '''
import atexit, os, sys
_WATCHED = ("tensorflow", "keras")
_LOG_DIR = os.environ["IMPORT_LOG_DIR"]


def _record(kind, line):
    with open(os.path.join(_LOG_DIR, f"{kind}-{os.getpid()}.txt"), "a") as f:
        f.write(line + "\\n")


def _loaded():
    return " ".join(sorted(m for m in sys.modules if m.split(".")[0] in _WATCHED))


def _audit(event, args):
    if event == "import" and args[0].split(".")[0] in _WATCHED:
        _record("import", args[0])
    elif event == "pickle.find_class" and args[1] == "process_chunk_in_worker":
        _record("worker", "loaded: " + _loaded())


sys.addaudithook(_audit)
atexit.register(lambda: _record("exit", "loaded: " + _loaded()))
'''


@pytest.mark.slow
def test_the_data_scripts_and_their_workers_never_import_tensorflow(tmp_path):
    """build_vocab.py and create_pretraining_data.py (parent and worker processes) load neither
    TensorFlow nor Keras: each would cost every process seconds and half a gigabyte."""
    hooks, logs = tmp_path / "hooks", tmp_path / "logs"
    hooks.mkdir()
    logs.mkdir()
    (hooks / "sitecustomize.py").write_text(_WATCH_IMPORTS)
    env = {**_ENV, "PYTHONPATH": str(hooks), "IMPORT_LOG_DIR": str(logs)}
    words = ["river", "stone", "light", "garden", "window", "forest", "market", "winter"]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(
        "\n".join(" ".join(words[(d + s + w) % 8] for w in range(6 + s)) + "." for s in range(5))
        for d in range(40)) + "\n")
    vocab = tmp_path / "vocab.txt"
    built = _script("build_vocab.py", f"--input_file={corpus}", f"--output_file={vocab}",
                    "--vocab_size=60", "--lower_thresh=1", env=env)
    assert built.returncode == 0, built.stderr
    created = _script("create_pretraining_data.py", f"--input_file={corpus}",
                      f"--output_file={tmp_path}/out.tfrecord", f"--vocab_file={vocab}",
                      "--max_seq_length=32", "--max_predictions_per_seq=4", "--dupe_factor=2",
                      "--num_workers=2", "--chunk_bytes=512", "--min_chunk_documents=1", env=env)
    assert created.returncode == 0, created.stderr
    assert (tmp_path / "out.tfrecord").stat().st_size > 0
    records = {path.name: path.read_text().splitlines() for path in logs.iterdir()}
    assert not [name for name in records if name.startswith("import-")], records
    exits = [name for name in records if name.startswith("exit-")]
    workers = [name for name in records if name.startswith("worker-")]
    assert len(exits) >= 2 and workers, records  # both scripts, and workers handed chunks
    assert {line for name in exits + workers for line in records[name]} == {"loaded: "}
