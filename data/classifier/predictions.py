"""Output files of a classifier on a user's own files, beside the original's `test_results.tsv`.

- `predictions.jsonl`: one JSON object a test example: its id (the `--id_column`'s value, else its
  row number from 0), its label (single-label), labels (multi-label: those whose probability
  reaches the threshold) or prediction (regression), and the probability of every label.
- `confusion_matrix.tsv`: a single-label dev split's counts, a row per gold label and a column per
  predicted label, both headed by the label names.
"""
from __future__ import annotations

import json
import os
from typing import Sequence

import numpy as np

from data.classifier.features import InputExample
from utils.output_files import write_text_atomically


def prediction_records(examples: Sequence[InputExample], outputs: np.ndarray,
                       labels: Sequence[str], problem_type: str,
                       threshold: float = 0.5) -> list[dict]:
    """One record per example, as `predictions.jsonl` holds them.

    Args:
        examples: the test examples, in order.
        outputs: float [N, K] probabilities (softmax, or a sigmoid each for multi-label), or
            [N] predictions for regression.
        labels: the label names by class index.
        problem_type: single_label, multi_label or regression.
        threshold: multi-label: the probability from which a label is predicted.
    """
    records = []
    for number, (example, row) in enumerate(zip(examples, np.asarray(outputs))):
        record = {"id": example.index if example.index is not None else number}
        if problem_type == "regression":
            record["prediction"] = float(np.reshape(row, -1)[0])
        else:
            probabilities = {label: float(p) for label, p in zip(labels, row)}
            if problem_type == "multi_label":
                record["labels"] = [label for label, p in probabilities.items() if p >= threshold]
            else:
                record["label"] = labels[int(np.argmax(row))]
            record["probabilities"] = probabilities
        records.append(record)
    return records


def write_predictions_jsonl(path: str | os.PathLike, records: Sequence[dict]) -> None:
    write_text_atomically(path, "".join(json.dumps(record) + "\n" for record in records))


def write_confusion_matrix(path: str | os.PathLike, matrix: np.ndarray,
                           labels: Sequence[str]) -> None:
    """`confusion_matrix.tsv`: `gold \\ predicted`, the label names, then a row per gold label."""
    lines = ["\t".join(["gold \\ predicted", *labels]) + "\n"]
    lines += ["\t".join([label, *(str(int(count)) for count in row)]) + "\n"
              for label, row in zip(labels, matrix)]
    write_text_atomically(path, "".join(lines))
