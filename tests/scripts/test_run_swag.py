"""End-to-end runs of run_swag.py on generated CSVs in the SWAG distribution layout."""
import csv
import math
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from synthetic import swag_ner
from tests.support.paths import REPO_ROOT
from tests.support.tiny_task_model import flag_args, write_tiny_model

pytestmark = pytest.mark.slow


def _run(**flags) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO_ROOT / "run_swag.py"), *flag_args(flags)],
                          capture_output=True, text=True, cwd=REPO_ROOT)


def _check(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def _eval_results(path) -> dict[str, str]:
    return dict(line.rstrip("\n").split(" = ") for line in open(path, encoding="utf-8"))


def _rows(path) -> list[list[str]]:
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.reader(f))


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    folder = tmp_path_factory.mktemp("swag")
    model = write_tiny_model(folder / "model")
    data_dir = folder / "data"
    data_dir.mkdir()
    (data_dir / "train.csv").write_text(swag_ner.swag_csv(32, seed=1))
    (data_dir / "val.csv").write_text(swag_ner.swag_csv(8, seed=2))
    (data_dir / "test.csv").write_text(swag_ner.swag_csv(6, seed=3, labelled=False))
    return folder, {**model, "data_dir": data_dir, "max_seq_length": 32}


@pytest.fixture(scope="module")
def trained(setup):
    folder, flags = setup
    output_dir = folder / "out"
    _check(_run(**flags, output_dir=output_dir, do_train=True, do_eval=True, do_predict=True,
                train_batch_size=8, eval_batch_size=3, num_train_epochs=1.0))
    return output_dir


def test_train_eval_predict_writes_results_predictions_and_models(setup, trained):
    _, flags = setup
    results = _eval_results(trained / "eval_results.txt")
    assert sorted(results) == ["eval_accuracy", "eval_loss", "global_step", "loss"]
    assert results["global_step"] == "4"  # 32 questions / batch 8 x 1 epoch

    # eval_accuracy and eval_loss agree with the per-question probabilities written beside them.
    labels = [int(row[-1]) for row in _rows(flags["data_dir"] / "val.csv")[1:]]
    header, *rows = _rows(trained / "eval_predictions.csv")
    assert header == ["id", "prob0", "prob1", "prob2", "prob3", "prediction"]
    assert [row[0] for row in rows] == [str(i) for i in range(8)]
    probabilities = np.array([[float(p) for p in row[1:5]] for row in rows])
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-6)
    predictions = [int(row[5]) for row in rows]
    assert predictions == list(np.argmax(probabilities, axis=1))
    assert float(results["eval_accuracy"]) == pytest.approx(
        np.mean(np.equal(predictions, labels)), abs=1e-7)
    assert float(results["eval_loss"]) == pytest.approx(
        np.mean([-math.log(p[label]) for p, label in zip(probabilities, labels)]), rel=1e-5)

    header, *rows = _rows(trained / "predictions.csv")
    assert len(rows) == 6 and header[0] == "id"
    assert all(int(row[5]) in range(4) for row in rows)

    reader = tf.train.load_checkpoint(str(trained / "model.ckpt"))
    shapes = reader.get_variable_to_shape_map()
    assert shapes["cls/multiple_choice/output_weights"] == [1, 32]
    assert "bert/encoder/layer_1/output/dense/kernel" in shapes
    assert not any(name.startswith("output_") or "adam" in name for name in shapes)
    assert int(reader.get_tensor("global_step")) == 4
    assert (trained / "ckpt-4.index").is_file()
    assert (trained / "bert_config.json").read_text() == flags["bert_config_file"].read_text()
    assert not list(trained.glob("*.tmp*"))


def test_evaluation_alone_reads_the_model_in_either_format(setup, trained):
    folder, flags = setup
    expected = _eval_results(trained / "eval_results.txt")
    tf1_dir = folder / "from_tf1"
    _check(_run(**{**flags, "init_checkpoint": trained / "model.ckpt"}, output_dir=tf1_dir,
                do_eval=True))
    project_dir = folder / "from_project"
    _check(_run(**{**flags, "init_checkpoint": trained}, output_dir=project_dir, do_eval=True))
    for output_dir in (tf1_dir, project_dir):
        results = _eval_results(output_dir / "eval_results.txt")
        assert results["eval_accuracy"] == expected["eval_accuracy"]
        assert float(results["eval_loss"]) == pytest.approx(float(expected["eval_loss"]),
                                                            rel=1e-5)
        assert results["global_step"] == "4"
    assert not (tf1_dir / "predictions.csv").exists()


def test_a_pretrained_checkpoint_cannot_be_evaluated(setup, tmp_path):
    _, flags = setup
    result = _run(**flags, output_dir=tmp_path / "out", do_eval=True)
    assert result.returncode != 0
    assert "cls/multiple_choice/output_weights" in result.stderr
    assert not (tmp_path / "out" / "eval_results.txt").exists()


def test_bad_label_fails_before_anything_is_written(setup, tmp_path):
    _, flags = setup
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    lines = swag_ner.swag_csv(3, seed=4).splitlines()
    lines[2] = lines[2][:-1] + "7"
    (data_dir / "val.csv").write_text("\n".join(lines) + "\n")
    result = _run(**{**flags, "data_dir": data_dir}, output_dir=tmp_path / "out", do_eval=True)
    assert result.returncode != 0
    assert f"{data_dir / 'val.csv'}:3: label '7'" in result.stderr
    assert not (tmp_path / "out").exists()


def test_learns_the_generated_questions(setup, tmp_path):
    folder, flags = setup
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "train.csv").write_text(swag_ner.swag_csv(160, seed=5))
    (data_dir / "val.csv").write_text(swag_ner.swag_csv(40, seed=6))
    _check(_run(**{**flags, "data_dir": data_dir}, output_dir=tmp_path / "out", do_train=True,
                do_eval=True, train_batch_size=16, learning_rate=1e-3, num_train_epochs=5.0,
                eval_batch_size=40))
    results = _eval_results(tmp_path / "out" / "eval_results.txt")
    assert results["global_step"] == "50"
    # Chance is 0.25; the "back to" cue is learnt from random values within 50 steps.
    assert float(results["eval_accuracy"]) >= 0.9
