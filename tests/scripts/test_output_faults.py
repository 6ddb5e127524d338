"""Faults while a script writes its outputs, every script that writes one, run as a user runs it.

A SIGTERM or SIGINT arrives the moment an output's temporary file or folder appears
(`tests/support/stop_while_writing.py` sends the real signal to the real script at that point), or a
file-size limit (RLIMIT_FSIZE: EFBIG, what a full disk's ENOSPC does to a write) makes the write
fail. Each case checks that the script exits non-zero saying why, and that its output folder holds
byte for byte what it held before: the user's earlier outputs whole, nothing half-written under a
final name and no temporary file left behind.
"""
import os
import pathlib
import resource
import shutil
import signal
import subprocess
import sys
import time

import pytest

from synthetic import swag_ner
from tests.support.paths import REPO_ROOT
from tests.support.script_errors import TRACEBACK, assert_user_error
from tests.support.tiny_task_model import flag_args, write_tiny_model

pytestmark = pytest.mark.slow

_ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}
_EARLIER = b"the user's earlier output\n"

# The original's tiny model with its fine-tuned heads and Google's uncased vocabulary.
_ORIGINAL = ["--vocab_file={vocab}", "--bert_config_file={tiny}/bert_config.json"]
_CLASSIFIER = _ORIGINAL + ["--task_name=mnli", "--data_dir={glue}/MNLI", "--max_seq_length=64",
                           "--init_checkpoint={tiny}/classifier/model.ckpt", "--output_dir={out}"]
_SQUAD = _ORIGINAL + ["--do_predict", "--predict_file={squad}/dev-v1.1.json",
                      "--init_checkpoint={tiny}/squad/model.ckpt", "--max_seq_length=128",
                      "--doc_stride=64", "--max_query_length=32", "--output_dir={out}"]
_EXTRACT = _ORIGINAL + ["--init_checkpoint={tiny}/bert_model.ckpt", "--layers=-1,-2",
                        "--input_file={lines}", "--output_file={out}/features.jsonl",
                        "--max_seq_length=32"]
_CONVERT = ["--input={tiny}/classifier/model.ckpt", "--output={out}/converted", "--to=hf",
            "--bert_config_file={tiny}/bert_config.json", "--vocab_file={vocab}"]
_EXPORT = ["--input={tiny}/classifier/model.ckpt", "--output={out}/exported",
           "--bert_config_file={tiny}/bert_config.json", "--vocab_file={vocab}",
           "--max_seq_length=32"]
_EMBED = ["--task=embed", "--model={tiny}/bert_model.ckpt", "--input_file={lines}",
          "--output_file={out}/vectors.npy", "--bert_config_file={tiny}/bert_config.json",
          "--vocab_file={vocab}", "--max_seq_length=32"]
_CREATE = ["--input_file={corpus}", "--output_file={out}/x.tfrecord", "--vocab_file={vocab}",
           "--max_seq_length=32", "--dupe_factor=2"]
_PRETRAIN_EVAL = ["--do_eval", "--input_file={records}", "--init_checkpoint={tiny}/bert_model.ckpt",
                  "--bert_config_file={tiny}/bert_config.json", "--output_dir={out}",
                  "--max_seq_length=128", "--max_predictions_per_seq=20", "--eval_batch_size=2",
                  "--max_eval_steps=2"]
_SWAG = ["--do_predict", "--data_dir={swag}/data", "--output_dir={out}", "--max_seq_length=32",
         "--vocab_file={swag}/model/vocab.txt", "--bert_config_file={swag}/model/bert_config.json"]
_NER = ["--do_predict", "--data_dir={ner}/data", "--output_dir={out}", "--max_seq_length=40",
        "--vocab_file={ner}/model/vocab.txt", "--bert_config_file={ner}/model/bert_config.json"]

# (case id, script, flags, earlier outputs in {out}, fault, the temporary name the signal waits
# for or the file-size limit in bytes, what the message says).
_CASES = [
    ("classifier_eval_sigterm", "run_classifier.py", _CLASSIFIER + ["--do_eval"],
     ["eval_results.txt"], "SIGTERM", "eval_results.txt.*.tmp", "stopped by SIGTERM"),
    ("classifier_predict_sigint", "run_classifier.py", _CLASSIFIER + ["--do_predict"],
     ["test_results.tsv", "MNLI-m.tsv"], "SIGINT", "test_results.tsv.*.tmp", "stopped by SIGINT"),
    ("classifier_submission_sigterm", "run_classifier.py", _CLASSIFIER + ["--do_predict"],
     ["MNLI-m.tsv"], "SIGTERM", "MNLI-m.tsv.*.tmp", "stopped by SIGTERM"),
    ("classifier_eval_file_size_limit", "run_classifier.py", _CLASSIFIER + ["--do_eval"],
     ["eval_results.txt"], "FSIZE", 24, "eval_results.txt failed: File too large"),
    ("squad_predictions_sigterm", "run_squad.py", _SQUAD,
     ["predictions.json", "nbest_predictions.json"], "SIGTERM", "predictions.json.*.tmp",
     "stopped by SIGTERM"),
    ("squad_nbest_sigint", "run_squad.py", _SQUAD, ["predictions.json", "nbest_predictions.json"],
     "SIGINT", "nbest_predictions.json.*.tmp", "stopped by SIGINT"),
    ("squad_file_size_limit", "run_squad.py", _SQUAD,
     ["predictions.json", "nbest_predictions.json"], "FSIZE", 64, "failed: File too large"),
    ("swag_predict_sigterm", "run_swag.py", _SWAG, ["predictions.csv"], "SIGTERM",
     "predictions.csv.*.tmp", "stopped by SIGTERM"),
    ("ner_predict_sigint", "run_ner.py", _NER, ["predictions_test.txt", "test_results.txt"],
     "SIGINT", "predictions_test.txt.*.tmp", "stopped by SIGINT"),
    ("ner_results_sigterm", "run_ner.py", _NER, ["test_results.txt"], "SIGTERM",
     "test_results.txt.*.tmp", "stopped by SIGTERM"),
    ("extract_features_sigterm", "extract_features.py", _EXTRACT, ["features.jsonl"], "SIGTERM",
     "features.jsonl.*.tmp", "stopped by SIGTERM"),
    ("extract_features_file_size_limit", "extract_features.py", _EXTRACT, ["features.jsonl"],
     "FSIZE", 4096, "features.jsonl failed: File too large"),
    ("convert_sigint", "convert_checkpoint.py", _CONVERT, [], "SIGINT", ".converted.tmp-*",
     "stopped by SIGINT"),
    ("convert_file_size_limit", "convert_checkpoint.py", _CONVERT, [], "FSIZE", 65536,
     "File too large"),
    ("export_sigterm", "export_savedmodel.py", _EXPORT, [], "SIGTERM", ".exported.tmp-*",
     "stopped by SIGTERM"),
    ("export_file_size_limit", "export_savedmodel.py", _EXPORT, [], "FSIZE", 65536,
     "File too large"),
    ("predict_text_sigint", "predict_text.py", _EMBED, ["vectors.npy", "vectors.txt"], "SIGINT",
     "vectors.txt.*.tmp", "stopped by SIGINT"),
    ("predict_text_file_size_limit", "predict_text.py", _EMBED, ["vectors.npy", "vectors.txt"],
     "FSIZE", 256, "vectors.npy failed: File too large"),
    ("create_pretraining_data_sigterm", "create_pretraining_data.py", _CREATE, ["x.tfrecord"],
     "SIGTERM", ".x.tfrecord.*.incomplete", "stopped by SIGTERM"),
    ("pretraining_eval_sigint", "run_pretraining.py", _PRETRAIN_EVAL, ["eval_results.txt"],
     "SIGINT", "eval_results.txt.*.tmp", "stopped by SIGINT"),
]


def _fine_tuned(folder: pathlib.Path, script: str, files: dict[str, str], max_seq_length: int):
    """A tiny model fine-tuned by `script` in `folder/out`, its data in `folder/data`."""
    model = write_tiny_model(folder / "model")
    (folder / "data").mkdir()
    for name, text in files.items():
        (folder / "data" / name).write_text(text)
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / script), *flag_args({
            **model, "data_dir": folder / "data", "output_dir": folder / "out",
            "max_seq_length": max_seq_length, "do_train": True, "train_batch_size": 8,
            "num_train_epochs": 1.0})],
        capture_output=True, text=True, cwd=REPO_ROOT, env=_ENV, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return folder


@pytest.fixture(scope="module")
def values(tmp_path_factory, fixtures_dir, uncased_vocab) -> dict:
    root = tmp_path_factory.mktemp("faults")
    lines = root / "lines.txt"
    lines.write_text("".join(f"sentence number {i} of the file ||| and its pair\n"
                             for i in range(200)))
    corpus = root / "corpus.txt"
    corpus.write_text("".join(f"The {i}th document starts here.\nIt has a second line.\n\n"
                              for i in range(50)))
    return {
        "tiny": fixtures_dir / "original" / "tiny", "vocab": uncased_vocab,
        "glue": fixtures_dir / "glue" / "inputs", "squad": fixtures_dir / "squad" / "inputs",
        "records": fixtures_dir / "pretraining_data" / "original_wwm_false.tfrecord",
        "lines": lines, "corpus": corpus,
        "swag": _fine_tuned(root / "swag", "run_swag.py", {
            "train.csv": swag_ner.swag_csv(8, seed=1),
            "test.csv": swag_ner.swag_csv(6, seed=3, labelled=False)}, 32),
        "ner": _fine_tuned(root / "ner", "run_ner.py", {
            "train.txt": swag_ner.conll_text(4, seed=1),
            "test.txt": swag_ner.conll_text(3, seed=2)}, 40),
    }


def _snapshot(folder: pathlib.Path) -> dict[str, bytes | None]:
    """Every file's bytes and every folder (None) under `folder`, by relative path."""
    return {str(path.relative_to(folder)): path.read_bytes() if path.is_file() else None
            for path in sorted(folder.rglob("*"))}


def _output_folder(tmp_path: pathlib.Path, values: dict, script: str,
                   earlier: list[str]) -> pathlib.Path:
    """The run's output folder: a copy of the fine-tuned one where the script needs it, holding
    the user's earlier outputs."""
    out = tmp_path / "out"
    source = {"run_swag.py": "swag", "run_ner.py": "ner"}.get(script)
    if source:
        shutil.copytree(values[source] / "out", out)
    else:
        out.mkdir()
    for name in earlier:
        (out / name).write_bytes(_EARLIER)
    return out


def test_the_table_covers_every_script_that_writes_outputs_and_each_fault():
    scripts = {case[1] for case in _CASES}
    assert scripts == {"run_classifier.py", "run_squad.py", "run_swag.py", "run_ner.py",
                       "extract_features.py", "convert_checkpoint.py", "export_savedmodel.py",
                       "predict_text.py", "create_pretraining_data.py", "run_pretraining.py"}
    assert {case[4] for case in _CASES} == {"SIGTERM", "SIGINT", "FSIZE"}


@pytest.mark.parametrize("script,flags,earlier,fault,when,message",
                         [case[1:] for case in _CASES], ids=[case[0] for case in _CASES])
def test_a_fault_while_writing_leaves_the_output_folder_as_it_was(values, tmp_path, script, flags,
                                                                   earlier, fault, when, message):
    out = _output_folder(tmp_path, values, script, earlier)
    before = _snapshot(out)
    args = [flag.format(**values, out=out) for flag in flags]
    if fault == "FSIZE":
        def limit_file_size():
            resource.setrlimit(resource.RLIMIT_FSIZE, (when, resource.RLIM_INFINITY))
        command, preexec = [str(REPO_ROOT / script), *args], limit_file_size
    else:
        command = ["-m", "tests.support.stop_while_writing", fault, when, str(REPO_ROOT / script),
                   *args]
        preexec = None
    result = subprocess.run([sys.executable, *command], capture_output=True, text=True,
                            cwd=REPO_ROOT, env=_ENV, timeout=600, preexec_fn=preexec)
    assert result.returncode == 1, result.stderr[-3000:]
    if fault == "FSIZE":
        assert_user_error(result.stderr, message)
    else:
        assert f"sending {fault} while writing {out}" in result.stderr, result.stderr[-3000:]
        assert message in result.stderr and TRACEBACK not in result.stderr, result.stderr[-3000:]
    after = _snapshot(out)
    assert sorted(after) == sorted(before)  # nothing added, nothing removed
    assert after == before


def test_sigterm_from_outside_while_features_stream_out(values, tmp_path):
    """A scheduler's SIGTERM at an arbitrary point of a long write, sent from another process."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "features.jsonl").write_bytes(_EARLIER)
    lines = tmp_path / "lines.txt"
    lines.write_text(values["lines"].read_text() * 20)  # 4,000 lines: several seconds
    args = [flag.format(**values, out=out) for flag in _EXTRACT if not flag.startswith(
        "--input_file")] + [f"--input_file={lines}", "--batch_size=8"]
    process = subprocess.Popen([sys.executable, str(REPO_ROOT / "extract_features.py"), *args],
                               stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT, env=_ENV)
    deadline = time.monotonic() + 300
    while not any(p.stat().st_size > 0 for p in out.glob("features.jsonl.*.tmp")):
        assert process.poll() is None and time.monotonic() < deadline, "no output was started"
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 1, stderr[-3000:]
    assert "stopped by SIGTERM" in stderr and TRACEBACK not in stderr, stderr[-3000:]
    assert sorted(p.name for p in out.iterdir()) == ["features.jsonl"]
    assert (out / "features.jsonl").read_bytes() == _EARLIER
