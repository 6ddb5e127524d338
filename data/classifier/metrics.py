"""Classification metrics in numpy: accuracy, F1, Matthews correlation, Pearson and Spearman
(GLUE's), and for a user's own files every metric of their problem type.

Each follows the reference implementations the GLUE leaderboard uses (scikit-learn's
`accuracy_score`, `f1_score`, `matthews_corrcoef`; SciPy's `pearsonr`, `spearmanr`), including
their edge cases: F1 and Matthews are 0 where their denominator is 0, and Spearman ranks ties
by their average rank. Macro and weighted F1 average over the labels that occur in the gold
labels or the predictions, as scikit-learn's; a multi-label task's macro F1 over all its labels.
`task_metrics` gives a task's dict with the keys of `eval_results.txt`.
"""
from __future__ import annotations

import re

import numpy as np

from data.classifier import glue_tasks


def accuracy(predictions: np.ndarray, labels: np.ndarray) -> float:
    """Fraction of predictions equal to the labels; 0 for no examples (as `tf.metrics`)."""
    predictions, labels = _same_length(predictions, labels)
    if not len(labels):
        return 0.0
    return float(np.mean(predictions == labels))


def f1_score(predictions: np.ndarray, labels: np.ndarray, positive_label: int = 1) -> float:
    """F1 of the positive class: 2 TP / (2 TP + FP + FN), 0 when nothing is positive."""
    predictions, labels = _same_length(predictions, labels)
    predicted, actual = predictions == positive_label, labels == positive_label
    true_positives = np.sum(predicted & actual)
    denominator = np.sum(predicted) + np.sum(actual)
    return float(2 * true_positives / denominator) if denominator else 0.0


def matthews_corrcoef(predictions: np.ndarray, labels: np.ndarray) -> float:
    """Matthews correlation coefficient (its multi-class form), 0 when undefined.

    From the confusion matrix C of N examples with row sums t and column sums p:
    (N trace(C) - t.p) / sqrt((N^2 - p.p) (N^2 - t.t)).
    """
    predictions, labels = _same_length(predictions, labels)
    num_examples = len(labels)
    _, class_ids = np.unique(np.concatenate([labels, predictions]), return_inverse=True)
    num_classes = int(class_ids.max()) + 1 if num_examples else 0
    confusion = np.zeros((num_classes, num_classes), dtype=np.float64)
    np.add.at(confusion, (class_ids[:num_examples], class_ids[num_examples:]), 1.0)
    true_sums, predicted_sums = confusion.sum(axis=1), confusion.sum(axis=0)
    covariance = num_examples * np.trace(confusion) - true_sums @ predicted_sums
    predicted_variance = num_examples ** 2 - predicted_sums @ predicted_sums
    true_variance = num_examples ** 2 - true_sums @ true_sums
    if predicted_variance * true_variance == 0:
        return 0.0
    return float(covariance / np.sqrt(predicted_variance * true_variance))


def pearson_correlation(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson's r; NaN when either input is constant (as SciPy)."""
    x, y = _same_length(np.asarray(x, np.float64), np.asarray(y, np.float64))
    dx, dy = x - x.mean(), y - y.mean()
    denominator = np.sqrt(np.sum(dx * dx) * np.sum(dy * dy))
    return float(np.sum(dx * dy) / denominator) if denominator else float("nan")


def average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks, ties sharing their mean rank: [10, 20, 20, 5] -> [2, 3.5, 3.5, 1]."""
    values = np.asarray(values)
    order = np.argsort(values, kind="stable")
    sorted_values = values[order]
    starts_group = np.r_[True, sorted_values[1:] != sorted_values[:-1]]
    group_of_position = np.cumsum(starts_group) - 1
    group_starts = np.flatnonzero(starts_group)
    group_ends = np.r_[group_starts[1:], len(values)]
    # Positions start..end-1 hold ranks start+1..end, whose mean is (start + end + 1) / 2.
    group_ranks = (group_starts + group_ends + 1) / 2.0
    ranks = np.empty(len(values), dtype=np.float64)
    ranks[order] = group_ranks[group_of_position]
    return ranks


def spearman_correlation(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rho: Pearson's r of the average ranks."""
    x, y = _same_length(x, y)
    return pearson_correlation(average_ranks(x), average_ranks(y))


def per_label_counts(predicted: np.ndarray, actual: np.ndarray) -> dict[str, np.ndarray]:
    """True positives, false positives and false negatives of each label, and its support.

    Args:
        predicted, actual: bool [N, K], whether each example has (is predicted to have) each label.
    """
    predicted, actual = np.asarray(predicted, bool), np.asarray(actual, bool)
    return {"tp": np.sum(predicted & actual, axis=0), "fp": np.sum(predicted & ~actual, axis=0),
            "fn": np.sum(~predicted & actual, axis=0), "support": np.sum(actual, axis=0)}


def _ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """numerator / denominator, 0 where the denominator is 0."""
    numerator, denominator = np.asarray(numerator, float), np.asarray(denominator, float)
    return np.divide(numerator, denominator, out=np.zeros_like(numerator),
                     where=denominator > 0)


def _label_key(label: str) -> str:
    return re.sub(r"\s+", "_", label.strip())


def _per_label_results(counts: dict[str, np.ndarray], labels: list[str]) -> dict[str, float]:
    precision = _ratio(counts["tp"], counts["tp"] + counts["fp"])
    recall = _ratio(counts["tp"], counts["tp"] + counts["fn"])
    f1 = _ratio(2 * counts["tp"], 2 * counts["tp"] + counts["fp"] + counts["fn"])
    results = {}
    for index, label in enumerate(labels):
        key = _label_key(label)
        results.update({f"eval_precision_{key}": float(precision[index]),
                        f"eval_recall_{key}": float(recall[index]),
                        f"eval_f1_{key}": float(f1[index]),
                        f"eval_support_{key}": int(counts["support"][index])})
    return results


def confusion_matrix(predicted_ids: np.ndarray, label_ids: np.ndarray,
                     num_labels: int) -> np.ndarray:
    """int64 [K, K]: row = gold label, column = predicted label."""
    matrix = np.zeros((num_labels, num_labels), np.int64)
    np.add.at(matrix, (np.asarray(label_ids, int), np.asarray(predicted_ids, int)), 1)
    return matrix


def single_label_metrics(predicted_ids: np.ndarray, label_ids: np.ndarray,
                         labels: list[str]) -> dict[str, float]:
    """Accuracy, macro and weighted F1, Matthews correlation and each label's precision, recall,
    F1 and support."""
    predicted_ids, label_ids = _same_length(predicted_ids, label_ids)
    eye = np.eye(len(labels), dtype=bool)
    counts = per_label_counts(eye[predicted_ids], eye[label_ids])
    f1 = _ratio(2 * counts["tp"], 2 * counts["tp"] + counts["fp"] + counts["fn"])
    present = (counts["support"] + counts["tp"] + counts["fp"]) > 0
    support = counts["support"]
    return {"eval_accuracy": accuracy(predicted_ids, label_ids),
            "eval_f1_macro": float(np.mean(f1[present])) if present.any() else 0.0,
            "eval_f1_weighted": float(_ratio(np.sum(f1 * support), np.sum(support))),
            "eval_mcc": matthews_corrcoef(predicted_ids, label_ids),
            **_per_label_results(counts, labels)}


def multi_label_metrics(probabilities: np.ndarray, label_ids: np.ndarray, labels: list[str],
                        threshold: float = 0.5) -> dict[str, float]:
    """Micro and macro F1 (precision, recall), subset accuracy and each label's figures; a label
    is predicted where its probability is at least `threshold`.

    Args:
        probabilities: float [N, K] sigmoid outputs.
        label_ids: [N, K] 1 where the example has the label, 0 elsewhere.
    """
    predicted = np.asarray(probabilities) >= threshold
    actual = np.asarray(label_ids) > 0.5
    counts = per_label_counts(predicted, actual)
    tp, fp, fn = (int(np.sum(counts[key])) for key in ("tp", "fp", "fn"))
    f1 = _ratio(2 * counts["tp"], 2 * counts["tp"] + counts["fp"] + counts["fn"])
    return {"eval_f1_micro": float(_ratio(2 * tp, 2 * tp + fp + fn)),
            "eval_precision_micro": float(_ratio(tp, tp + fp)),
            "eval_recall_micro": float(_ratio(tp, tp + fn)),
            "eval_f1_macro": float(np.mean(f1)) if len(f1) else 0.0,
            "eval_subset_accuracy": float(np.mean(np.all(predicted == actual, axis=1)))
            if len(actual) else 0.0,
            **_per_label_results(counts, labels)}


def regression_metrics(predictions: np.ndarray, scores: np.ndarray) -> dict[str, float]:
    """Pearson's r, Spearman's rho and the mean squared error."""
    predictions, scores = _same_length(np.asarray(predictions, np.float64),
                                       np.asarray(scores, np.float64))
    return {"eval_pearson": pearson_correlation(predictions, scores),
            "eval_spearman": spearman_correlation(predictions, scores),
            "eval_mse": float(np.mean(np.square(predictions - scores))) if len(scores) else 0.0}


def task_metrics(task: glue_tasks.GlueTask, predictions: np.ndarray, label_ids: np.ndarray,
                 is_real_example: np.ndarray | None = None,
                 threshold: float = 0.5) -> dict[str, float]:
    """The task's metrics, keyed as in `eval_results.txt`.

    Args:
        task: The task; its `metric` picks what is reported besides accuracy.
        predictions: Classification: float [N, num_labels] probabilities or logits (argmax
            taken) or int [N] class ids. Regression: float [N] or [N, 1] scores.
        label_ids: int [N] class ids, or float [N] scores for regression.
        is_real_example: [N], 0 for padding examples, which are left out; None keeps all.

        threshold: a multi-label task's: the probability from which a label is predicted.

    Returns:
        Classification: `eval_accuracy`, plus `eval_mcc` (CoLA) or `eval_f1` (MRPC, QQP).
        Regression (STS-B): `eval_pearson` and `eval_spearman`. A user's own files: every
        metric of the problem type (`single_label_metrics`, `multi_label_metrics`,
        `regression_metrics`).
    """
    predictions, label_ids = np.asarray(predictions), np.asarray(label_ids)
    if is_real_example is not None and task.is_multi_label:
        keep = np.asarray(is_real_example).astype(bool)
        predictions, label_ids = predictions[keep], label_ids[keep]
    if task.is_multi_label:
        return multi_label_metrics(predictions, label_ids, list(task.labels), threshold)
    if task.is_regression:
        predictions = predictions.reshape(len(predictions), -1)[:, 0]
    elif predictions.ndim == 2:
        predictions = np.argmax(predictions, axis=-1)
    if is_real_example is not None:
        keep = np.asarray(is_real_example).astype(bool)
        predictions, label_ids = predictions[keep], label_ids[keep]
    if task.metric == glue_tasks.EVERY_METRIC:
        return regression_metrics(predictions, label_ids) if task.is_regression else \
            single_label_metrics(predictions, label_ids, list(task.labels))
    if task.metric == glue_tasks.CORRELATION:
        return {"eval_pearson": pearson_correlation(predictions, label_ids),
                "eval_spearman": spearman_correlation(predictions, label_ids)}
    results = {"eval_accuracy": accuracy(predictions, label_ids)}
    if task.metric == glue_tasks.MATTHEWS:
        results["eval_mcc"] = matthews_corrcoef(predictions, label_ids)
    elif task.metric == glue_tasks.F1:
        results["eval_f1"] = f1_score(predictions, label_ids)
    return results


def loss_metrics(per_example_loss: np.ndarray, is_real_example: np.ndarray,
                 batch_size: int) -> dict[str, float]:
    """`eval_loss` and `loss` as the original's Estimator evaluation reports them.

    Args:
        per_example_loss: float [N], in evaluation order, padding examples included.
        is_real_example: [N], 0 for padding examples.
        batch_size: Evaluation batch size (the last batch may be smaller).

    Returns:
        `eval_loss`: mean over real examples. `loss`: mean over batches of each batch's mean
        loss, padding included (the training loss evaluated batch by batch).
    """
    per_example_loss, weights = _same_length(np.asarray(per_example_loss, np.float64),
                                             np.asarray(is_real_example, np.float64))
    total_weight = np.sum(weights)
    eval_loss = float(np.sum(per_example_loss * weights) / total_weight) if total_weight else 0.0
    batch_means = [np.mean(per_example_loss[start:start + batch_size])
                   for start in range(0, len(per_example_loss), batch_size)]
    return {"eval_loss": eval_loss, "loss": float(np.mean(batch_means)) if batch_means else 0.0}


def _same_length(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.asarray(a).reshape(-1), np.asarray(b).reshape(-1)
    if len(a) != len(b):
        raise ValueError(f"Arrays of different lengths: {len(a)} and {len(b)}")
    return a, b
