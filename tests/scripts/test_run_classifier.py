"""End-to-end tests of run_classifier.py: the real command line on small files in the GLUE layouts.

Every task is fine-tuned for two steps from a tiny random checkpoint, evaluated and predicted; the
output files are checked for their keys, row counts and consistency. The original code's tiny
fine-tuned classifier gives the probabilities the original computed; an easy generated task is
learned to high accuracy, with the best epoch's model kept and reloaded.
"""
import json
import os
import pathlib
import re
import resource
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from data.classifier.glue_tasks import get_task
from modeling.checkpoints import save_tf1_checkpoint
from modeling.config import BertConfig
from modeling.models.encoder import BertEncoder
from synthetic import corpus
from tests.support.classifier_runs import (MNLI_COLUMNS, MNLI_DEV_HEADER, NUM_DEV, TRAIN_FLAGS,
                                           check_ok, eval_results, popen_classifier,
                                           read_test_results, run_classifier,
                                           tiny_model,  # noqa: F401 (a fixture)
                                           write_glue_task, write_tsv, write_xnli)
from tests.support.paths import REPO_ROOT
from tests.support.script_runner import run_cells
from training.run_guards import exclusive_output_dir

pytestmark = pytest.mark.slow


def _submission(path: pathlib.Path) -> list[list[str]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "index\tprediction"
    return [line.split("\t") for line in lines[1:]]


def _expected_eval_keys(task_name: str) -> set[str]:
    metric_keys = {"cola": {"eval_accuracy", "eval_mcc"}, "mrpc": {"eval_accuracy", "eval_f1"},
                   "qqp": {"eval_accuracy", "eval_f1"}, "stsb": {"eval_pearson", "eval_spearman"}}
    return {"eval_loss", "global_step", "loss"} | metric_keys.get(task_name, {"eval_accuracy"})


def _check_predictions(output_dir: pathlib.Path, task_name: str, split, test_rows) -> np.ndarray:
    """Checks test_results and the submission file of a test split; returns the probabilities."""
    task = get_task(task_name)
    results = read_test_results(output_dir / f"test_results{split.results_suffix}.tsv")
    assert results.shape == (len(test_rows), task.num_labels)
    submission = _submission(output_dir / split.submission_file)
    assert [index for index, _ in submission] == [row[0] for row in test_rows]
    if task.is_regression:
        expected = [float(np.clip(score, 0.0, 5.0)) for score in results[:, 0]]
        np.testing.assert_allclose([float(p) for _, p in submission], expected, rtol=1e-6)
    else:
        np.testing.assert_allclose(results.sum(axis=1), 1.0, atol=1e-5)
        assert [p for _, p in submission] == [task.labels[i] for i in results.argmax(axis=1)]
    return results


def _scalars(folder: pathlib.Path, tag: str) -> list[tuple[int, float]]:
    """(step, value) of one TensorBoard scalar, in the order written."""
    values = []
    for path in sorted(folder.glob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            values += [(event.step, float(tf.make_ndarray(v.tensor)))
                       for v in event.summary.value if v.tag == tag]
    return values


def _check_fine_tuned_checkpoint(output_dir: pathlib.Path, num_labels: int, step: int) -> None:
    reader = tf.train.load_checkpoint(str(output_dir / "model.ckpt"))
    shapes = reader.get_variable_to_shape_map()
    assert shapes["output_weights"] == [num_labels, 32]
    assert shapes["output_bias"] == [num_labels]
    assert "bert/pooler/dense/kernel" in shapes
    assert int(reader.get_tensor("global_step")) == step
    assert json.loads((output_dir / "bert_config.json").read_text())["hidden_size"] == 32


# ----------------------------------------------------------------------------- tests

# SST-2 is run end to end below, on data it can learn.
GLUE_TASKS = ["cola", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli"]


def _flags(*args: str, **flags) -> list[str]:
    return [*args, *(f"--{name}={value}" for name, value in flags.items())]


@pytest.fixture(scope="module")
def glue_runs(tiny_model, tmp_path_factory) -> dict[str, tuple[pathlib.Path, dict]]:
    """Each GLUE task trained, evaluated and predicted on its generated files, every run in one
    process (`tests/support/script_runner.py`): {task: (its folder, its test rows)}."""
    root = tmp_path_factory.mktemp("glue_runs")
    cells, folders = {}, {}
    for task_name in GLUE_TASKS:
        folder = root / task_name
        folders[task_name] = folder, write_glue_task(folder / "data", task_name)
        cells[task_name] = _flags("--do_train", "--do_eval", "--do_predict",
                                  task_name=task_name.upper(), data_dir=folder / "data",
                                  output_dir=folder / "out", **tiny_model, **TRAIN_FLAGS)
    for task_name, result in run_cells("run_classifier.py", cells, str(root)).items():
        assert result["status"] == 0, result["stderr"][-3000:]
    return folders


@pytest.mark.parametrize("task_name", GLUE_TASKS)
def test_every_glue_task_trains_evaluates_and_predicts(glue_runs, task_name):
    task = get_task(task_name)
    folder, test_rows = glue_runs[task_name]
    output_dir = folder / "out"
    # 8 examples in batches of 4 for one epoch.
    _check_fine_tuned_checkpoint(output_dir, task.num_labels, 2)
    for split in task.splits_for("eval"):
        results = eval_results(output_dir / f"eval_results{split.results_suffix}.txt")
        assert set(results) == _expected_eval_keys(task_name)
        assert results["global_step"] == 2
        assert results["eval_loss"] > 0
    for split in task.splits_for("predict"):
        _check_predictions(output_dir, task_name, split, test_rows[split.name])


def test_xnli_trains_on_one_language_and_evaluates_its_dev_rows(tiny_model, tmp_path):
    write_xnli(tmp_path / "xnli")
    output_dir = tmp_path / "out"
    check_ok(run_classifier("--do_train", "--do_eval", task_name="XNLI", data_dir=tmp_path / "xnli",
                            output_dir=output_dir, **tiny_model, **TRAIN_FLAGS))
    _check_fine_tuned_checkpoint(output_dir, 3, 2)
    results = eval_results(output_dir / "eval_results.txt")
    assert set(results) == _expected_eval_keys("xnli")
    # 7 zh dev rows (the de rows are left out): accuracy is a multiple of 1/7.
    assert round(results["eval_accuracy"] * NUM_DEV, 4) == round(results["eval_accuracy"]
                                                                  * NUM_DEV)


# The third example of the original's fixture, `[CLS] barracks refusal 2nd 35 sanders [SEP]` in one
# segment, is what this text gives with an empty second text.
_ORIGINAL_TEXT = "barracks refusal 2nd 35 sanders"
_NLI_LABELS = ("contradiction", "entailment", "neutral")


def _original_classifier(fixtures_dir, uncased_vocab) -> tuple[dict, dict]:
    tiny = fixtures_dir / "original" / "tiny"
    reference = np.load(tiny / "outputs_L16.npz")
    flags = {"vocab_file": uncased_vocab, "bert_config_file": tiny / "bert_config.json",
             "init_checkpoint": tiny / "classifier" / "model.ckpt", "max_seq_length": 16}
    return flags, {"probabilities": reference["classifier_probabilities"][2],
                   "label_id": int(reference["inputs/classifier_labels"][2])}


def test_original_fine_tuned_classifier_gives_the_original_probabilities(fixtures_dir,
                                                                          uncased_vocab,
                                                                          tmp_path):
    """The original run_classifier.py's checkpoint (3 labels) evaluated and predicted as MNLI."""
    flags, reference = _original_classifier(fixtures_dir, uncased_vocab)
    probabilities = reference["probabilities"]
    row = ["0", "7", "0e", "news", "( x )", "( y )", "(ROOT x)", "(ROOT y)", _ORIGINAL_TEXT, ""]
    # The same example twice, labelled with the fixture's label and with the predicted class.
    dev_labels = [_NLI_LABELS[reference["label_id"]], _NLI_LABELS[int(np.argmax(probabilities))]]
    data_dir = tmp_path / "mnli"
    for name in ("dev_matched", "dev_mismatched"):
        write_tsv(data_dir / f"{name}.tsv", MNLI_DEV_HEADER,
                  [row + [label] * 6 for label in dev_labels])
    for name in ("test_matched", "test_mismatched"):
        write_tsv(data_dir / f"{name}.tsv", MNLI_COLUMNS, [row])
    output_dir = tmp_path / "out"
    check_ok(run_classifier("--do_eval", "--do_predict", task_name="MNLI", data_dir=data_dir,
                            output_dir=output_dir, **flags))
    expected_loss = -np.mean(np.log([probabilities[_NLI_LABELS.index(label)]
                                     for label in dev_labels]))
    for suffix in ("", "_mismatched"):
        np.testing.assert_allclose(read_test_results(output_dir / f"test_results{suffix}.tsv"),
                                   [probabilities], atol=1e-5)
        results = eval_results(output_dir / f"eval_results{suffix}.txt")
        np.testing.assert_allclose(results["eval_loss"], expected_loss, atol=1e-5)
        np.testing.assert_allclose(results["loss"], expected_loss, atol=1e-5)
        assert results["eval_accuracy"] == 0.5
        # The original's checkpoint has no global_step variable.
        assert results["global_step"] == 0
    predicted = [["0", _NLI_LABELS[int(np.argmax(probabilities))]]]
    assert _submission(output_dir / "MNLI-m.tsv") == predicted
    assert _submission(output_dir / "MNLI-mm.tsv") == predicted


def test_mnli_without_mismatched_files_evaluates_and_predicts_the_matched_ones(
        fixtures_dir, uncased_vocab, tmp_path):
    """The original reads only the matched files; the mismatched ones are skipped, with a log line."""
    flags, reference = _original_classifier(fixtures_dir, uncased_vocab)
    row = ["0", "7", "0e", "news", "( x )", "( y )", "(ROOT x)", "(ROOT y)", _ORIGINAL_TEXT, ""]
    data_dir = tmp_path / "mnli"
    write_tsv(data_dir / "dev_matched.tsv", MNLI_DEV_HEADER,
              [row + [_NLI_LABELS[reference["label_id"]]] * 6])
    write_tsv(data_dir / "test_matched.tsv", MNLI_COLUMNS, [row])
    output_dir = tmp_path / "out"
    result = run_classifier("--do_eval", "--do_predict", task_name="MNLI", data_dir=data_dir,
                            output_dir=output_dir, **flags)
    check_ok(result)
    for name in ("dev_mismatched", "test_mismatched"):
        assert f"mnli {name}: {data_dir / name}.tsv does not exist; skipping" in result.stderr
    assert sorted(path.name for path in output_dir.iterdir()) == [
        "MNLI-m.tsv", "eval", "eval_results.txt", "test_results.tsv"]
    np.testing.assert_allclose(read_test_results(output_dir / "test_results.tsv"),
                               [reference["probabilities"]], atol=1e-5)


def test_diagnostic_set_is_predicted_with_an_mnli_model(fixtures_dir, uncased_vocab, tmp_path):
    flags, reference = _original_classifier(fixtures_dir, uncased_vocab)
    rows = [["0", _ORIGINAL_TEXT, ""], ["1", "The cat sat on the mat.", "A cat sat."],
            ["2", "Nobody came.", "Everyone came to the party, which was long and loud."]]
    write_tsv(tmp_path / "diagnostic" / "diagnostic.tsv", ["index", "sentence1", "sentence2"],
              rows)
    output_dir = tmp_path / "out"
    check_ok(run_classifier("--do_predict", task_name="AX", data_dir=tmp_path / "diagnostic",
                            output_dir=output_dir, predict_batch_size=2, **flags))
    results = _check_predictions(output_dir, "ax", get_task("ax").splits_for("predict")[0], rows)
    np.testing.assert_allclose(results[0], reference["probabilities"], atol=1e-5)
    assert sorted(path.name for path in output_dir.iterdir()) == ["AX.tsv", "test_results.tsv"]


def test_learns_sst2_predicts_it_and_keeps_the_best_epoch(tiny_model, tmp_path):
    """SST-2 end to end: a few hundred steps learn the generated sentiment task."""
    data_dir = tmp_path / "sst2"
    data_dir.mkdir()
    (data_dir / "train.tsv").write_text(corpus.sst2_tsv(1024, seed=11))
    (data_dir / "dev.tsv").write_text(corpus.sst2_tsv(101, seed=12))
    test_examples = corpus.sentiment_rows(30, seed=13)
    test_rows = [[str(i), text] for i, (text, _) in enumerate(test_examples)]
    write_tsv(data_dir / "test.tsv", ["index", "sentence"], test_rows)
    output_dir = tmp_path / "out"
    check_ok(run_classifier("--do_train", "--do_eval", "--do_predict", "--eval_every_epoch",
                            task_name="SST-2", data_dir=data_dir, output_dir=output_dir,
                            **tiny_model, **{**TRAIN_FLAGS, "train_batch_size": 16,
                                             "eval_batch_size": 8, "num_train_epochs": 3}))
    epochs = [eval_results(output_dir / f"eval_results_epoch_{n}.txt") for n in (1, 2, 3)]
    assert [r["global_step"] for r in epochs] == [64, 128, 192]
    # The dev curve in TensorBoard (each epoch, then the final evaluation at the same step) and
    # every training step in train_log.jsonl.
    curve = _scalars(output_dir / "eval", "eval_accuracy")
    assert curve[:3] == [(r["global_step"], pytest.approx(r["eval_accuracy"])) for r in epochs]
    records = [json.loads(line)
               for line in (output_dir / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if "eval" not in r] == list(range(1, 193))
    # Each scoring's results follow the step they were scored at.
    assert [(r["step"], r["eval"]["eval_accuracy"]) for r in records if "eval" in r] == [
        (r["global_step"], pytest.approx(r["eval_accuracy"])) for r in epochs]
    final = eval_results(output_dir / "eval_results.txt")
    assert final == epochs[2]
    assert final["eval_accuracy"] > 0.9
    _check_predictions(output_dir, "sst2", get_task("sst2").splits_for("predict")[0], test_rows)
    predicted = [int(label) for _, label in _submission(output_dir / "SST-2.tsv")]
    assert np.mean(np.equal(predicted, [label for _, label in test_examples])) > 0.9
    # The first epoch with the highest accuracy is kept, in the original format.
    best = max(epochs, key=lambda r: r["eval_accuracy"])
    assert eval_results(output_dir / "best" / "eval_results.txt") == best
    _check_fine_tuned_checkpoint(output_dir / "best", 2, int(best["global_step"]))
    reloaded = tmp_path / "reloaded"
    check_ok(run_classifier("--do_eval", task_name="sst2", data_dir=data_dir, output_dir=reloaded,
                            vocab_file=tiny_model["vocab_file"],
                            bert_config_file=tiny_model["bert_config_file"],
                            init_checkpoint=output_dir / "best" / "model.ckpt", max_seq_length=32,
                            eval_batch_size=8))
    assert eval_results(reloaded / "eval_results.txt") == pytest.approx(best, abs=1e-6)


@pytest.mark.parametrize("decay,after_warmup", [
    ("original", lambda t: 1e-3 * (1 - t / 16)),
    ("from_peak", lambda t: 1e-3 * (16 - t) / 12)])
def test_learning_rate_decay_flag_sets_the_schedule(tiny_model, tmp_path, decay, after_warmup):
    """16 steps, 4 of warm-up: the original's decay runs from step 0, from_peak's from the end
    of warm-up (train_log.jsonl: after update t, the rate of update t + 1)."""
    data_dir = tmp_path / "sst2"
    data_dir.mkdir()
    (data_dir / "train.tsv").write_text(corpus.sst2_tsv(64, seed=11))
    output_dir = tmp_path / "out"
    check_ok(run_classifier("--do_train", f"--learning_rate_decay={decay}",
                            "--warmup_proportion=0.25", task_name="sst2", data_dir=data_dir,
                            output_dir=output_dir, **tiny_model,
                            **{**TRAIN_FLAGS, "train_batch_size": 8, "num_train_epochs": 2}))
    rates = [json.loads(line)["learning_rate"]
             for line in (output_dir / "train_log.jsonl").read_text().splitlines()]
    expected = [1e-3 * t / 4 if t < 4 else after_warmup(t) for t in range(1, 17)]
    assert rates == pytest.approx(expected, rel=1e-6, abs=1e-12)


def _wait_for_step(output_dir: pathlib.Path, step: int, process: subprocess.Popen) -> None:
    log = output_dir / "train_log.jsonl"
    deadline = time.monotonic() + 300
    while not (log.exists() and len(log.read_text().splitlines()) >= step):
        assert process.poll() is None, process.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "training did not start"
        time.sleep(0.2)


def test_sigterm_saves_the_step_and_a_rerun_ends_as_an_uninterrupted_run(tiny_model, tmp_path):
    """Preemption: SIGTERM mid-run checkpoints the current step and exits saying so; rerunning
    resumes without redoing a step. A run is refused a folder another run trains in."""
    data_dir = tmp_path / "sst2"
    data_dir.mkdir()
    (data_dir / "train.tsv").write_text(corpus.sst2_tsv(256, seed=11))
    flags = {**tiny_model, "task_name": "sst2", "data_dir": data_dir, "max_seq_length": 32,
             "train_batch_size": 8, "num_train_epochs": 12, "learning_rate": 1e-3,
             "save_checkpoints_steps": 100000}
    output_dir = tmp_path / "interrupted"
    with exclusive_output_dir(str(output_dir)):  # as a run training there holds it
        refused = run_classifier("--do_train", output_dir=output_dir, **flags)
    assert refused.returncode != 0
    assert f"--output_dir={output_dir} is in use by another training run" in refused.stderr
    assert not tf.train.latest_checkpoint(str(output_dir))
    first = popen_classifier(output_dir=output_dir, **flags)
    _wait_for_step(output_dir, 3, first)
    first.send_signal(signal.SIGTERM)
    _, stderr = first.communicate(timeout=300)
    assert first.returncode != 0
    assert "interrupted by SIGTERM at step" in stderr, stderr[-3000:]
    stopped_at = int(stderr.split("interrupted by SIGTERM at step ")[1].split("/")[0])
    assert 3 <= stopped_at < 384
    assert tf.train.latest_checkpoint(str(output_dir)).endswith(f"ckpt-{stopped_at}")
    check_ok(run_classifier("--do_train", output_dir=output_dir, **flags))
    steps = [json.loads(line)["step"]
             for line in (output_dir / "train_log.jsonl").read_text().splitlines()]
    assert steps == list(range(1, 385))  # 256 examples / 8 x 12 epochs, each step once
    straight = tmp_path / "straight"
    check_ok(run_classifier("--do_train", output_dir=straight, **flags))
    resumed = tf.train.load_checkpoint(str(output_dir / "model.ckpt"))
    expected = tf.train.load_checkpoint(str(straight / "model.ckpt"))
    for name in expected.get_variable_to_shape_map():
        np.testing.assert_allclose(resumed.get_tensor(name), expected.get_tensor(name),
                                   atol=1e-6, err_msg=name)


def test_a_file_size_limit_while_checkpointing_is_named_and_leaves_no_partial_files(tiny_model,
                                                                                  tmp_path):
    """EFBIG, as a full disk would: the error names the checkpoint and the cause."""
    data_dir = tmp_path / "sst2"
    data_dir.mkdir()
    (data_dir / "train.tsv").write_text(corpus.sst2_tsv(16, seed=11))
    limit = pathlib.Path(tiny_model["init_checkpoint"] + ".data-00000-of-00001").stat().st_size
    output_dir = tmp_path / "out"

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit // 2, resource.RLIM_INFINITY))
    command = [sys.executable, str(REPO_ROOT / "run_classifier.py"), "--do_train",
               "--task_name=sst2", f"--data_dir={data_dir}", f"--output_dir={output_dir}",
               "--max_seq_length=32", "--train_batch_size=8", "--num_train_epochs=1",
               *(f"--{k}={v}" for k, v in tiny_model.items())]
    result = subprocess.run(command, capture_output=True, text=True, cwd=REPO_ROOT,
                            preexec_fn=small_files,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert result.returncode != 0
    assert re.search(rf"writing checkpoint {output_dir}/ckpt-2 failed: .*File too large",
                     result.stderr), result.stderr[-3000:]
    assert not list(output_dir.glob("ckpt-*")) and not (output_dir / "model.ckpt.index").exists()


@pytest.mark.parametrize("args,flags,message", [
    ((), {"task_name": "glue"}, "valid tasks: cola, sst2, mrpc"),
    (("--do_train",), {"task_name": "rte"}, "train.tsv does not exist"),
])
def test_bad_input_is_reported_before_anything_is_written(tiny_model, tmp_path, args, flags,
                                                          message):
    write_tsv(tmp_path / "data" / "dev.tsv", ["index", "sentence1", "sentence2", "label"],
              [["0", "a", "b", "entailment"]])
    output_dir = tmp_path / "out"
    result = run_classifier("--do_eval", *args, data_dir=tmp_path / "data", output_dir=output_dir,
                            max_seq_length=32, **tiny_model, **flags)
    assert result.returncode != 0
    assert message in result.stderr
    assert not output_dir.exists()


DAMAGES = ("truncated", "missing", "pretrained")


@pytest.fixture(scope="module")
def named_init_runs(fixtures_dir, uncased_vocab, tmp_path_factory) -> dict[str, tuple]:
    """For each damage: --output_dir holding a fine-tuned classifier and earlier results, and
    --init_checkpoint naming another model that cannot be used. Each evaluation runs with it,
    and without it in a copy of the folder, all in one process: {damage: (output_dir, its files
    before the run, other, results with it, without it)}."""
    root = tmp_path_factory.mktemp("named_init")
    flags, _ = _original_classifier(fixtures_dir, uncased_vocab)
    fine_tuned = pathlib.Path(flags["init_checkpoint"])
    data_dir = root / "mnli"
    row = ["0", "7", "0e", "news", "( x )", "( y )", "(ROOT x)", "(ROOT y)", _ORIGINAL_TEXT, ""]
    write_tsv(data_dir / "dev_matched.tsv", MNLI_DEV_HEADER, [row + ["neutral"] * 6])
    without_init = {k: v for k, v in flags.items() if k != "init_checkpoint"}
    folders, with_init, without = {}, {}, {}
    for damage in DAMAGES:
        output_dir = root / damage / "out"
        output_dir.mkdir(parents=True)
        for source in fine_tuned.parent.glob(fine_tuned.name + ".*"):
            (output_dir / source.name).write_bytes(source.read_bytes())
        (output_dir / "eval_results.txt").write_text("earlier results\n")
        other = root / damage / "other" / "model.ckpt"
        other.parent.mkdir()
        if damage == "truncated":
            for source in fine_tuned.parent.glob(fine_tuned.name + ".*"):
                data = source.read_bytes()
                (other.parent / source.name).write_bytes(
                    data[:len(data) // 2] if ".data-" in source.name else data)
        elif damage == "pretrained":
            save_tf1_checkpoint(BertEncoder(BertConfig.from_json_file(flags["bert_config_file"])),
                                str(other))
        copy = root / damage / "copy"
        shutil.copytree(output_dir, copy)
        folders[damage] = output_dir, _files(output_dir), other
        with_init[damage] = _flags("--do_eval", task_name="MNLI", data_dir=data_dir,
                                   output_dir=output_dir, **{**flags, "init_checkpoint": other})
        without[damage] = _flags("--do_eval", task_name="MNLI", data_dir=data_dir,
                                 output_dir=copy, **without_init)
    cells = {**{f"with/{d}": a for d, a in with_init.items()},
             **{f"without/{d}": a for d, a in without.items()}}
    results = run_cells("run_classifier.py", cells, str(root))
    return {damage: (*folders[damage], results[f"with/{damage}"], results[f"without/{damage}"])
            for damage in DAMAGES}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_named_init_checkpoint_is_used_or_the_evaluation_stops(named_init_runs, damage):
    """--output_dir holds a fine-tuned classifier; --init_checkpoint names another model that
    cannot be used: the run fails with its error and leaves the earlier results as they were,
    rather than evaluating the model of --output_dir."""
    output_dir, before, other, result, without_init = named_init_runs[damage]
    assert result["status"] != 0
    assert str(other) in result["stderr"]
    assert {"truncated": "truncated or corrupt", "missing": "does not exist",
            "pretrained": "output_weights: missing"}[damage] in result["stderr"]
    assert "using the fine-tuned model" not in result["stderr"]
    assert _files(output_dir) == before
    assert (output_dir / "eval_results.txt").read_text() == "earlier results\n"
    # The same folder, without --init_checkpoint: its own model is evaluated.
    assert without_init["status"] == 0, without_init["stderr"][-3000:]
    assert "eval_accuracy" in (output_dir.parent / "copy" / "eval_results.txt").read_text()


def _files(folder: pathlib.Path) -> dict[str, bytes | None]:
    """{name: content (None for a folder)} of what `folder` holds."""
    return {path.name: path.read_bytes() if path.is_file() else None
            for path in sorted(folder.iterdir())}
