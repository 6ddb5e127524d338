"""Tests of data/classifier/metrics.py on hand-computed cases."""
import math

import numpy as np
import pytest

from data.classifier.glue_tasks import get_task
from data.classifier.metrics import (accuracy, average_ranks, f1_score, loss_metrics,
                                     matthews_corrcoef, pearson_correlation, spearman_correlation,
                                     task_metrics)

# TP at 0 and 4, FP at 1, TN at 2, FN at 3.
_PREDICTIONS = np.array([1, 1, 0, 0, 1])
_LABELS = np.array([1, 0, 0, 1, 1])


def test_accuracy():
    assert accuracy(np.array([1, 0, 1, 1]), np.array([1, 1, 1, 0])) == 0.5
    assert accuracy(_PREDICTIONS, _LABELS) == pytest.approx(3 / 5)
    assert accuracy(np.array([], int), np.array([], int)) == 0.0
    with pytest.raises(ValueError, match="different lengths"):
        accuracy(np.array([1, 0]), np.array([1]))


def test_f1_of_the_positive_class():
    # 2 TP / (2 TP + FP + FN) = 4 / 6.
    assert f1_score(_PREDICTIONS, _LABELS) == pytest.approx(2 / 3)
    # Swapping the classes: TP 1, FP 1, FN 1 -> 2 / 4.
    assert f1_score(1 - _PREDICTIONS, 1 - _LABELS) == pytest.approx(0.5)
    assert f1_score(np.zeros(4, int), np.zeros(4, int)) == 0.0
    assert f1_score(np.zeros(4, int), np.array([0, 1, 0, 1])) == 0.0


def test_matthews_binary():
    # (TP TN - FP FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)) = (2 - 1) / sqrt(3 * 3 * 2 * 2).
    assert matthews_corrcoef(_PREDICTIONS, _LABELS) == pytest.approx(1 / 6)
    assert matthews_corrcoef(_LABELS, _LABELS) == pytest.approx(1.0)
    assert matthews_corrcoef(1 - _LABELS, _LABELS) == pytest.approx(-1.0)


def test_matthews_zero_denominator_is_zero():
    assert matthews_corrcoef(np.ones(5, int), _LABELS) == 0.0
    assert matthews_corrcoef(_PREDICTIONS, np.zeros(5, int)) == 0.0
    assert matthews_corrcoef(np.array([], int), np.array([], int)) == 0.0


def test_matthews_multiclass():
    # The scikit-learn documentation's example: y_true [+1, +1, +1, -1], y_pred
    # [+1, -1, +1, +1] gives -0.33...; by hand: N=4, trace 2, t=(1, 3), p=(1, 3):
    # (4*2 - 10) / sqrt((16 - 10)(16 - 10)) = -1/3.
    assert matthews_corrcoef(np.array([1, -1, 1, 1]), np.array([1, 1, 1, -1])) == \
        pytest.approx(-1 / 3)
    # Three classes, C = [[2, 0, 0], [1, 1, 0], [0, 1, 1]]: N=6, trace 4, t=(2, 2, 2),
    # p=(3, 2, 1): (6*4 - 12) / sqrt((36 - 14)(36 - 12)) = 12 / sqrt(528).
    labels = np.array([0, 0, 1, 1, 2, 2])
    predictions = np.array([0, 0, 0, 1, 1, 2])
    assert matthews_corrcoef(predictions, labels) == pytest.approx(12 / math.sqrt(528))


def test_pearson():
    # dx = (-1, 0, 1), dy = (-7/3, -1/3, 8/3): 5 / sqrt(2 * 114/9) = 15 / sqrt(228).
    assert pearson_correlation(np.array([1, 2, 3]), np.array([2, 4, 7])) == \
        pytest.approx(15 / math.sqrt(228))
    assert pearson_correlation(np.array([1, 2, 3]), np.array([3, 2, 1])) == pytest.approx(-1)
    assert math.isnan(pearson_correlation(np.array([1, 1, 1]), np.array([1, 2, 3])))


def test_average_ranks():
    np.testing.assert_array_equal(average_ranks(np.array([10, 20, 20, 5])), [2, 3.5, 3.5, 1])
    np.testing.assert_array_equal(average_ranks(np.array([0.5, 0.5, 0.5])), [2, 2, 2])
    np.testing.assert_array_equal(average_ranks(np.array([3.0, 1.0, 2.0])), [3, 1, 2])


def test_spearman_with_ties():
    # Ranks (1, 2.5, 2.5, 4) and (1, 3, 2, 4): 4.5 / sqrt(4.5 * 5) = 3 / sqrt(10).
    x, y = np.array([1.0, 2.0, 2.0, 3.0]), np.array([0.1, 0.9, 0.5, 7.0])
    assert spearman_correlation(x, y) == pytest.approx(3 / math.sqrt(10))
    # Monotone but not linear: rank correlation 1, Pearson below 1.
    z = np.array([1.0, 2.0, 3.0, 4.0])
    assert spearman_correlation(z, z ** 3) == pytest.approx(1.0)
    assert pearson_correlation(z, z ** 3) < 0.99


def test_task_metrics_keys_and_padding():
    probabilities = np.array([[0.2, 0.8], [0.6, 0.4], [0.9, 0.1], [0.3, 0.7], [0.1, 0.9],
                              [0.0, 1.0]])
    labels = np.array([1, 0, 0, 1, 1, 0])
    real = np.array([1, 1, 1, 1, 1, 0])
    # Without the padding row the predictions are all right.
    assert task_metrics(get_task("cola"), probabilities, labels, real) == {
        "eval_accuracy": 1.0, "eval_mcc": pytest.approx(1.0)}
    cola = task_metrics(get_task("cola"), probabilities, labels)
    assert cola["eval_accuracy"] == pytest.approx(5 / 6)
    mrpc = task_metrics(get_task("mrpc"), _PREDICTIONS, _LABELS)
    assert mrpc == {"eval_accuracy": pytest.approx(0.6), "eval_f1": pytest.approx(2 / 3)}
    mnli = task_metrics(get_task("mnli"), np.eye(3)[[0, 1, 2, 2]], np.array([0, 1, 2, 1]))
    assert mnli == {"eval_accuracy": 0.75}


def test_task_metrics_regression():
    scores = np.array([[1.0], [2.0], [2.0], [3.0], [9.9]])
    gold = np.array([0.1, 0.9, 0.5, 7.0, 0.0], np.float32)
    results = task_metrics(get_task("stsb"), scores, gold, np.array([1, 1, 1, 1, 0]))
    assert set(results) == {"eval_pearson", "eval_spearman"}
    assert results["eval_spearman"] == pytest.approx(3 / math.sqrt(10))
    assert results["eval_pearson"] == pytest.approx(
        pearson_correlation(np.array([1, 2, 2, 3]), gold[:4]))


def test_loss_metrics():
    # Batches of 2: means 1.5, 3.5, 5 -> loss 10/3; real examples 1, 2, 3 -> eval_loss 2.
    results = loss_metrics(np.array([1.0, 2.0, 3.0, 4.0, 5.0]), np.array([1, 1, 1, 0, 0]), 2)
    assert results == {"eval_loss": pytest.approx(2.0), "loss": pytest.approx(10 / 3)}
    assert loss_metrics(np.array([]), np.array([]), 4) == {"eval_loss": 0.0, "loss": 0.0}


def test_single_label_metrics_by_hand():
    from data.classifier.metrics import confusion_matrix, single_label_metrics
    # Gold a a b b c; predicted a b b b a. Per label: a TP 1 FP 1 FN 1 -> P R F1 1/2;
    # b TP 2 FP 1 FN 0 -> P 2/3, R 1, F1 4/5; c TP 0 FP 0 FN 1 -> 0, 0, 0.
    gold, predicted = np.array([0, 0, 1, 1, 2]), np.array([0, 1, 1, 1, 0])
    results = single_label_metrics(predicted, gold, ["a", "b", "c"])
    assert results["eval_accuracy"] == pytest.approx(3 / 5)
    assert results["eval_precision_b"] == pytest.approx(2 / 3)
    assert results["eval_recall_b"] == pytest.approx(1.0)
    assert results["eval_f1_b"] == pytest.approx(4 / 5)
    assert results["eval_support_c"] == 1 and results["eval_f1_c"] == 0.0
    assert results["eval_f1_macro"] == pytest.approx((1 / 2 + 4 / 5 + 0) / 3)
    assert results["eval_f1_weighted"] == pytest.approx((2 * 1 / 2 + 2 * 4 / 5 + 0) / 5)
    assert results["eval_mcc"] == pytest.approx(matthews_corrcoef(predicted, gold))
    np.testing.assert_array_equal(confusion_matrix(predicted, gold, 3),
                                  [[1, 1, 0], [0, 2, 0], [1, 0, 0]])


def test_multi_label_metrics_by_hand():
    from data.classifier.metrics import multi_label_metrics
    gold = np.array([[1, 0, 1], [0, 1, 0], [0, 0, 0]])
    probabilities = np.array([[0.9, 0.2, 0.4], [0.1, 0.7, 0.6], [0.2, 0.1, 0.3]])
    # Predicted at 0.5: [1 0 0], [0 1 1], [0 0 0]. TP 2, FP 1, FN 1 -> micro F1 4 / 6.
    results = multi_label_metrics(probabilities, gold, ["x", "y", "z"])
    assert results["eval_f1_micro"] == pytest.approx(2 / 3)
    assert results["eval_precision_micro"] == pytest.approx(2 / 3)
    assert results["eval_recall_micro"] == pytest.approx(2 / 3)
    # x: F1 1, y: F1 1, z: TP 0 FP 1 FN 1 -> 0; macro 2 / 3.
    assert results["eval_f1_macro"] == pytest.approx(2 / 3)
    # Only the third row (no label, none predicted) is exactly right.
    assert results["eval_subset_accuracy"] == pytest.approx(1 / 3)
    assert results["eval_support_z"] == 1
    at_low_threshold = multi_label_metrics(probabilities, gold, ["x", "y", "z"], threshold=0.35)
    assert at_low_threshold["eval_recall_micro"] == pytest.approx(1.0)


def test_regression_metrics_by_hand():
    from data.classifier.metrics import regression_metrics
    results = regression_metrics(np.array([1.0, 2.0, 4.0]), np.array([1.0, 3.0, 4.0]))
    assert results["eval_mse"] == pytest.approx(1 / 3)
    assert results["eval_spearman"] == pytest.approx(1.0)
    assert results["eval_pearson"] == pytest.approx(
        np.corrcoef([1.0, 2.0, 4.0], [1.0, 3.0, 4.0])[0, 1])
