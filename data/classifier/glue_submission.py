"""Output files of sequence classification: the original's and the GLUE server's.

- `eval_results.txt`: `key = value` lines in sorted key order (`utils.output_files`).
- `test_results.tsv`: one line per test example, its per-class probabilities (or its score
  for regression) tab-separated, no header, as the original writes them.
- The GLUE server's submission file of a test split (`CoLA.tsv`, `MNLI-m.tsv`, `AX.tsv`, ...):
  header `index<TAB>prediction`, then each example's id and predicted label name (STS-B: its
  score clipped to [0, 5]).

Every file is written to a temporary file in the same folder and then renamed into place, so
a reader never sees half a file.
"""
from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from data.classifier.features import InputExample
from data.classifier.glue_tasks import GlueTask, SplitSpec
from utils.output_files import write_text_atomically

# Range of the STS-B similarity scores.
_MIN_SCORE, _MAX_SCORE = 0.0, 5.0


def write_test_results(path: str | os.PathLike, probabilities: np.ndarray) -> None:
    """Writes `test_results.tsv`: one line of tab-separated class probabilities per example.

    Args:
        path: Output file.
        probabilities: float [N, num_labels] for the real test examples only (padding
            examples removed), or [N] / [N, 1] scores for regression.
    """
    rows = np.asarray(probabilities, dtype=np.float32)
    rows = rows.reshape(len(rows), -1)
    lines = ["\t".join(str(value) for value in row) + "\n" for row in rows]
    write_text_atomically(path, "".join(lines))


def submission_predictions(task: GlueTask, probabilities: np.ndarray) -> list[str]:
    """The GLUE server's prediction strings: label names, or clipped scores for regression.

    Args:
        task: The task.
        probabilities: float [N, num_labels] probabilities or logits, or [N] / [N, 1] scores.
    """
    outputs = np.asarray(probabilities, dtype=np.float32)
    outputs = outputs.reshape(len(outputs), -1)
    if task.is_regression:
        scores = np.clip(outputs[:, 0], _MIN_SCORE, _MAX_SCORE)
        return [str(score) for score in scores]
    if outputs.shape[1] != len(task.labels):
        raise ValueError(f"{task.name} has {len(task.labels)} labels but the predictions "
                         f"have {outputs.shape[1]} columns")
    return [task.labels[class_id] for class_id in np.argmax(outputs, axis=1)]


def write_submission(output_dir: str | os.PathLike, task: GlueTask, split: SplitSpec,
                     examples: Sequence[InputExample], probabilities: np.ndarray) -> str:
    """Writes the GLUE server's file for a test split into `output_dir`.

    Args:
        output_dir: Folder to write into.
        task: The task.
        split: The test split predicted (its `submission_file` names the file).
        examples: The split's examples, as read (their `index` is the file's id column).
        probabilities: The model's outputs for those examples, in the same order.

    Returns:
        The path written.

    Raises:
        ValueError: If the split has no submission file or no ids, or the counts differ.
    """
    if split.submission_file is None:
        raise ValueError(f"The {task.name} {split.name} split has no GLUE submission file")
    if len(examples) != len(probabilities):
        raise ValueError(f"{len(examples)} {task.name} {split.name} examples but "
                         f"{len(probabilities)} predictions")
    missing = [example.guid for example in examples if example.index is None]
    if missing:
        raise ValueError(f"Examples without an id column value, e.g. {missing[0]}")
    predictions = submission_predictions(task, probabilities)
    lines = ["index\tprediction\n"]
    lines += [f"{example.index}\t{prediction}\n"
              for example, prediction in zip(examples, predictions)]
    path = os.path.join(os.fspath(output_dir), split.submission_file)
    write_text_atomically(path, "".join(lines))
    return path
