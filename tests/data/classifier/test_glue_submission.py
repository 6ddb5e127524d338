"""Tests of data/classifier/glue_submission.py: eval_results.txt, test_results.tsv, GLUE server files."""
import numpy as np
import pytest

from data.classifier.features import InputExample
from data.classifier.glue_submission import (submission_predictions, write_submission,
                                             write_test_results)
from data.classifier.glue_tasks import get_task, read_examples
from utils.output_files import write_eval_results


def _examples(indices):
    return [InputExample(guid=f"test-{i}", text_a="x", index=index)
            for i, index in enumerate(indices)]


def test_eval_results_in_the_original_format(tmp_path):
    path = tmp_path / "eval_results.txt"
    write_eval_results(path, {"loss": 0.5, "global_step": np.int64(343),
                              "eval_accuracy": 0.843137264251709, "eval_loss": 0.25,
                              "eval_f1": np.float32(0.8888889)})
    assert path.read_text() == ("eval_accuracy = 0.84313726\n"
                                "eval_f1 = 0.8888889\n"
                                "eval_loss = 0.25\n"
                                "global_step = 343\n"
                                "loss = 0.5\n")


def test_test_results_one_line_per_example(tmp_path):
    path = tmp_path / "test_results.tsv"
    write_test_results(path, np.array([[0.25, 0.75], [0.1, 0.9], [1e-08, 1.0]]))
    assert path.read_text() == "0.25\t0.75\n0.1\t0.9\n1e-08\t1.0\n"
    write_test_results(path, np.array([[4.5], [0.125]]))
    assert path.read_text() == "4.5\n0.125\n"


def test_mnli_submission_files(tmp_path):
    mnli = get_task("mnli")
    matched, mismatched = mnli.splits_for("predict")
    # Columns in label order: contradiction, entailment, neutral.
    probabilities = np.array([[0.1, 0.7, 0.2], [0.5, 0.2, 0.3], [0.1, 0.1, 0.8]])
    path = write_submission(tmp_path, mnli, matched, _examples(["0", "1", "2"]), probabilities)
    assert path == str(tmp_path / "MNLI-m.tsv")
    assert (tmp_path / "MNLI-m.tsv").read_text() == (
        "index\tprediction\n0\tentailment\n1\tcontradiction\n2\tneutral\n")
    write_submission(tmp_path, mnli, mismatched, _examples(["7", "9"]), probabilities[:2])
    assert (tmp_path / "MNLI-mm.tsv").read_text() == (
        "index\tprediction\n7\tentailment\n9\tcontradiction\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["MNLI-m.tsv", "MNLI-mm.tsv"]


def test_prediction_strings_per_task():
    two = np.array([[0.9, 0.1], [0.3, 0.7]])
    assert submission_predictions(get_task("cola"), two) == ["0", "1"]
    assert submission_predictions(get_task("qqp"), two) == ["0", "1"]
    assert submission_predictions(get_task("rte"), two) == ["entailment", "not_entailment"]
    assert submission_predictions(get_task("qnli"), two) == ["entailment", "not_entailment"]
    assert submission_predictions(get_task("ax"), np.eye(3)) == [
        "contradiction", "entailment", "neutral"]
    # STS-B scores clipped to the [0, 5] range of the task.
    assert submission_predictions(get_task("stsb"), np.array([[-0.5], [2.25], [5.75]])) == [
        "0.0", "2.25", "5.0"]
    with pytest.raises(ValueError, match="has 2 labels but the predictions have 3 columns"):
        submission_predictions(get_task("sst2"), np.eye(3))


def test_submission_of_a_real_test_file(shared_data_dir, tmp_path):
    rte = get_task("rte")
    examples = read_examples(rte, shared_data_dir / "glue" / "RTE", "test")
    probabilities = np.tile([[0.4, 0.6]], (len(examples), 1))
    write_submission(tmp_path, rte, rte.split("test"), examples, probabilities)
    lines = (tmp_path / "RTE.tsv").read_text().splitlines()
    assert len(lines) == 3001 and lines[0] == "index\tprediction"
    assert lines[1] == "0\tnot_entailment" and lines[-1] == "2999\tnot_entailment"


def test_submission_errors(tmp_path):
    rte = get_task("rte")
    with pytest.raises(ValueError, match="2 rte test examples but 3 predictions"):
        write_submission(tmp_path, rte, rte.split("test"), _examples(["0", "1"]), np.eye(3, 2))
    with pytest.raises(ValueError, match="no GLUE submission file"):
        write_submission(tmp_path, rte, rte.split("dev"), _examples(["0"]), np.eye(1, 2))
    with pytest.raises(ValueError, match="without an id"):
        write_submission(tmp_path, rte, rte.split("test"), _examples([None]), np.eye(1, 2))
    assert list(tmp_path.iterdir()) == []


def test_writes_replace_existing_files_whole(tmp_path):
    path = tmp_path / "test_results.tsv"
    path.write_text("old content that is longer than the new one\n" * 10)
    write_test_results(path, np.array([[0.5, 0.5]]))
    assert path.read_text() == "0.5\t0.5\n"
    assert [p.name for p in tmp_path.iterdir()] == ["test_results.tsv"]
    with pytest.raises(FileNotFoundError):
        write_test_results(tmp_path / "missing" / "test_results.tsv", np.array([[1.0]]))
