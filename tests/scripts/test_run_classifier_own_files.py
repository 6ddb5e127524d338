"""run_classifier.py on one's own files: GLUE tasks read through the file flags give the task's
numbers, multi-label JSON lines, labels saved and read back, class weights, and dev scored during
training with the best model kept and early stopping that survives kill -9."""
import csv
import json
import pathlib
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from synthetic import corpus
from tests.support.classifier_runs import (TRAIN_FLAGS, check_ok, eval_results, popen_classifier,
                                           run_classifier, tiny_model,  # noqa: F401 (fixture)
                                          write_glue_task)
from tests.support.paths import REPO_ROOT

pytestmark = pytest.mark.slow


def _tsv_rows(path: pathlib.Path) -> list[list[str]]:
    return [line.split("\t") for line in path.read_text(encoding="utf-8-sig").splitlines()]


def _write_csv(path: pathlib.Path, header: list[str], rows: list[list[str]]) -> None:
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


def _as_own_csvs(glue_dir: pathlib.Path, folder: pathlib.Path, text_a: int, text_b: int,
                 label: int) -> None:
    """The task's train and dev TSVs as CSVs with renamed columns in another order, and its test
    TSV without labels."""
    folder.mkdir()
    for name in ("train", "dev"):
        rows = _tsv_rows(glue_dir / f"{name}.tsv")[1:]
        _write_csv(folder / f"{name}.csv", ["second", "verdict", "first"],
                   [[row[text_b], row[label], row[text_a]] for row in rows])
    rows = _tsv_rows(glue_dir / "test.tsv")[1:]
    _write_csv(folder / "test.csv", ["key", "second", "first"],
               [[row[0], row[text_b], row[text_a]] for row in rows])


_OWN_COLUMNS = {"text_column": "first", "text_pair_column": "second", "label_column": "verdict"}


@pytest.mark.parametrize("task_name, columns, shared_keys, extra", [
    ("mrpc", (3, 4, 0), ["eval_accuracy", "eval_loss", "global_step", "loss"], {}),
    ("stsb", (7, 8, 9), ["eval_pearson", "eval_spearman", "eval_loss", "global_step", "loss"],
     {"problem_type": "regression"}),
])
def test_a_glue_task_through_the_file_flags_gives_the_task_names_numbers(
        tiny_model, tmp_path, task_name, columns, shared_keys, extra):
    write_glue_task(tmp_path / "glue", task_name)
    _as_own_csvs(tmp_path / "glue", tmp_path / "own", *columns)
    by_name, by_files = tmp_path / "by_name", tmp_path / "by_files"
    flags = {**tiny_model, **TRAIN_FLAGS}
    check_ok(run_classifier("--do_train", "--do_eval", "--do_predict", task_name=task_name,
                            data_dir=tmp_path / "glue", output_dir=by_name, **flags))
    check_ok(run_classifier("--do_train", "--do_eval", "--do_predict", **_OWN_COLUMNS, **extra,
                            train_file=tmp_path / "own" / "train.csv",
                            dev_file=tmp_path / "own" / "dev.csv",
                            test_file=tmp_path / "own" / "test.csv",
                            id_column="key", output_dir=by_files, **flags))
    # To the last printed digit.
    named = dict(line.split(" = ") for line in
                 (by_name / "eval_results.txt").read_text().splitlines())
    filed = dict(line.split(" = ") for line in
                 (by_files / "eval_results.txt").read_text().splitlines())
    assert {key: filed[key] for key in shared_keys} == {key: named[key] for key in shared_keys}
    assert (by_files / "test_results.tsv").read_text() == \
        (by_name / "test_results.tsv").read_text()
    records = [json.loads(line) for line in
               (by_files / "predictions.jsonl").read_text().splitlines()]
    test_ids = [row[0] for row in _tsv_rows(tmp_path / "glue" / "test.tsv")[1:]]
    assert [record["id"] for record in records] == test_ids
    if task_name == "mrpc":
        assert set(filed) >= {"eval_f1_macro", "eval_f1_weighted", "eval_mcc",
                              "eval_precision_0", "eval_recall_1", "eval_support_1"}
        assert (by_files / "label_list.txt").read_text() == "0\n1\n"
        matrix = [line.split("\t") for line in
                  (by_files / "confusion_matrix.tsv").read_text().splitlines()]
        assert matrix[0] == ["gold \\ predicted", "0", "1"]
        counts = np.array([[int(x) for x in row[1:]] for row in matrix[1:]])
        assert counts.sum() == 7 and np.trace(counts) / 7 == pytest.approx(
            float(filed["eval_accuracy"]), abs=1e-6)
    else:
        assert "eval_mse" in filed and "prediction" in records[0]


def _multi_label_rows(num_rows: int, seed: int) -> list[dict]:
    """Sentences tagged with what they mention: a person, a place word, "long"."""
    rows = []
    for text, label in corpus.sentiment_rows(num_rows, seed):
        tags = ["positive" if label == 1 else "negative"]
        if len(text.split()) > 9:
            tags.append("long")
        rows.append({"text": text, "tags": tags if seed % 2 else ",".join(tags)})
    return rows


def _write_jsonl(path: pathlib.Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def test_multi_label_json_lines_train_score_predict_and_read_back(tiny_model, tmp_path):
    _write_jsonl(tmp_path / "train.jsonl", _multi_label_rows(256, 1))
    _write_jsonl(tmp_path / "dev.jsonl", _multi_label_rows(40, 2))
    output_dir = tmp_path / "out"
    flags = {**tiny_model, "max_seq_length": 32, "train_batch_size": 16, "eval_batch_size": 8,
             "predict_batch_size": 8, "num_train_epochs": 3, "learning_rate": 2e-3}
    result = run_classifier("--do_train", "--do_eval", "--do_predict",
                            train_file=tmp_path / "train.jsonl", dev_file=tmp_path / "dev.jsonl",
                            test_file=tmp_path / "dev.jsonl", label_column="tags",
                            problem_type="multi_label", class_weights="balanced",
                            output_dir=output_dir, **flags)
    check_ok(result)
    # Balanced weights of each label's positive and negative terms, n / (2 count), logged.
    train = _multi_label_rows(256, 1)
    long_count = sum("long" in row["tags"] for row in train)
    assert f"long {256 / (2 * long_count):.4g}" in result.stderr
    assert (output_dir / "label_list.txt").read_text() == "long\nnegative\npositive\n"
    results = eval_results(output_dir / "eval_results.txt")
    # The micro-F1 of eval_results.txt is the one predictions.jsonl gives (dev is the test file).
    gold = [set(row["tags"].split(",")) for row in _multi_label_rows(40, 2)]
    predicted = [set(json.loads(line)["labels"]) for line in
                 (output_dir / "predictions.jsonl").read_text().splitlines()]
    true_positives = sum(len(g & p) for g, p in zip(gold, predicted))
    micro_f1 = 2 * true_positives / (sum(map(len, gold)) + sum(map(len, predicted)))
    assert results["eval_f1_micro"] == pytest.approx(micro_f1, abs=1e-6)
    assert results["eval_f1_micro"] > 0.7
    # Without --do_train the labels come from label_list.txt beside the model.
    again = tmp_path / "again"
    check_ok(run_classifier("--do_eval", dev_file=tmp_path / "dev.jsonl", label_column="tags",
                            problem_type="multi_label", output_dir=again,
                            init_checkpoint=output_dir, vocab_file=tiny_model["vocab_file"],
                            max_seq_length=32, eval_batch_size=8))
    assert eval_results(again / "eval_results.txt") == pytest.approx(results, abs=1e-6)
    lines = tmp_path / "lines.txt"
    lines.write_text(_multi_label_rows(3, 2)[0]["text"] + "\n")
    subprocess.run([sys.executable, str(REPO_ROOT / "predict_text.py"), "--task=classify",
                    f"--model={output_dir}", f"--input_file={lines}",
                    f"--output_file={tmp_path / 'answers.jsonl'}", "--max_seq_length=32"],
                   check=True, capture_output=True, cwd=REPO_ROOT)
    answer = json.loads((tmp_path / "answers.jsonl").read_text())
    assert set(answer["probabilities"]) == {"long", "negative", "positive"}
    assert answer["labels"] == [label for label, p in answer["probabilities"].items()
                                if p >= 0.5]


def _state(output_dir: pathlib.Path) -> dict:
    return json.loads((output_dir / "evaluation_state.json").read_text())


def test_early_stopping_keeps_the_best_and_survives_kill_9(tiny_model, tmp_path):
    """With a learning rate of 0 dev never improves on the first scoring: training stops after
    the patience's scorings, the first step's model in best/; a run killed with -9 after its
    second scoring and rerun ends as an uninterrupted run, with the same best and count."""
    data_dir = tmp_path / "sst2"
    data_dir.mkdir()
    (data_dir / "train.tsv").write_text(corpus.sst2_tsv(256, seed=11))
    (data_dir / "dev.tsv").write_text(corpus.sst2_tsv(40, seed=12))
    flags = {**tiny_model, "task_name": "sst2", "data_dir": data_dir, "max_seq_length": 32,
             "train_batch_size": 8, "eval_batch_size": 8, "num_train_epochs": 2,
             "learning_rate": 0.0, "eval_every_steps": 2, "early_stopping_patience": 3}
    straight = tmp_path / "straight"
    result = run_classifier("--do_train", output_dir=straight, **flags)
    check_ok(result)
    assert "early stopping at step 8: eval_accuracy has not improved in 3 scorings" in \
        result.stderr
    state = _state(straight)
    assert sorted(state["scored"], key=int) == ["2", "4", "6", "8"]
    assert len(set(state["scored"].values())) == 1  # nothing trains at a rate of 0
    assert (state["best_step"], state["without_improvement"], state["stopped_at"]) == (2, 3, 8)
    assert sorted(path.name for path in straight.glob("eval_results_step_*.txt")) == [
        f"eval_results_step_{step}.txt" for step in (2, 4, 6, 8)]
    assert eval_results(straight / "best" / "eval_results.txt")["global_step"] == 2
    assert (straight / "best" / "model.ckpt.index").exists()
    killed = tmp_path / "killed"
    process = popen_classifier(output_dir=killed, **flags)
    deadline = time.monotonic() + 300
    while not ((killed / "evaluation_state.json").exists() and
               len(_state(killed)["scored"]) >= 2):
        assert process.poll() is None, process.communicate()[1][-3000:]
        assert time.monotonic() < deadline
        time.sleep(0.1)
    process.send_signal(signal.SIGKILL)
    process.wait()
    check_ok(run_classifier("--do_train", output_dir=killed, **flags))
    assert _state(killed) == _state(straight)
    assert eval_results(killed / "best" / "eval_results.txt") == \
        eval_results(straight / "best" / "eval_results.txt")
    # A rerun of the stopped run trains no further.
    check_ok(run_classifier("--do_train", output_dir=killed, **flags))
    assert _state(killed)["stopped_at"] == 8
    evals = [json.loads(line)["step"] for line in
             (killed / "train_log.jsonl").read_text().splitlines() if "eval" in line]
    assert sorted(set(evals)) == [2, 4, 6, 8]
