"""The GLUE and XNLI tasks as rows of one table, read by one reader.

Each task lists its labels, its metric and the files of its distribution folder (the layout
the standard GLUE download script and the XNLI release produce). Each file is a `SplitSpec`:
which columns hold the texts, the label and the id, whether a header comes first. CoLA, MNLI,
MRPC and XNLI follow the original `run_classifier.py` processors (their guids included); the
other tasks, which the original lacks, follow the same conventions on their real layouts.
"""
from __future__ import annotations

import csv
import dataclasses
import os
from typing import BinaryIO, Iterator, Literal

from absl import logging

from data.classifier.features import InputExample

Role = Literal["train", "eval", "predict"]
# Metric kinds; `data.classifier.metrics.task_metrics` computes each. A user's own files report
# every metric of their problem type (`EVERY_METRIC`).
ACCURACY = "accuracy"
MATTHEWS = "matthews_corrcoef"
F1 = "f1"
CORRELATION = "correlation"
EVERY_METRIC = "every_metric"
# Problem types: one class per example (softmax), any number of classes (a sigmoid each), or a
# score.
SINGLE_LABEL, MULTI_LABEL, REGRESSION = "single_label", "multi_label", "regression"
PROBLEM_TYPES = (SINGLE_LABEL, MULTI_LABEL, REGRESSION)


@dataclasses.dataclass(frozen=True)
class SplitSpec:
    """One TSV file of a task and how to read it.

    Attributes:
        name: Split name given to `read_examples` (`train`, `dev`, `dev_mismatched`, ...).
        role: `train`, `eval` (labelled, scored) or `predict` (unlabelled test).
        file_name: Path relative to the task folder; `{language}` stands for XNLI's language.
        guid_prefix: The original's `set_type`, first part of each guid.
        text_a_column: Column of the first text.
        text_b_column: Column of the second text; None for single-sentence tasks.
        label_column: Column of the label (negative counts from the end); None when unlabelled.
        has_header: Whether the first line is a header.
        num_columns: Columns every row has; None to take the header's count.
        guid_column: Column that ends the guid; None to use the 0-based line number.
        index_column: Column of the id the GLUE server calls `index`.
        language_column: Column whose value must equal the requested language (XNLI dev).
        skip_malformed: Skip (and count) rows with the wrong number of columns instead of failing.
        results_suffix: Suffix of this split's output files (`eval_results_mismatched.txt`).
        submission_file: Name of the GLUE server's prediction file for this split.
        optional: The file may be absent from the task folder (the original reads only MNLI's
            matched files): runs skip the split, saying so, instead of failing.
    """

    name: str
    role: Role
    file_name: str
    guid_prefix: str
    text_a_column: int
    text_b_column: int | None = None
    label_column: int | None = None
    has_header: bool = True
    num_columns: int | None = None
    guid_column: int | None = None
    index_column: int | None = None
    language_column: int | None = None
    skip_malformed: bool = False
    results_suffix: str = ""
    submission_file: str | None = None
    optional: bool = False


@dataclasses.dataclass(frozen=True)
class GlueTask:
    """A sequence (pair) classification or regression task.

    Attributes:
        name: Lower-case task name, the value of `--task_name`.
        labels: Label strings in class-index order; empty for regression (STS-B).
        metric: What `task_metrics` reports besides accuracy: one of the metric kinds above.
        splits: The files of the task folder.
        label_aliases: Label spellings mapped to the canonical ones on reading.
        problem_type: One of `PROBLEM_TYPES`; None: regression for a task without labels,
            single-label otherwise (every GLUE task).
    """

    name: str
    labels: tuple[str, ...]
    metric: str
    splits: tuple[SplitSpec, ...]
    label_aliases: tuple[tuple[str, str], ...] = ()
    problem_type: str | None = None

    @property
    def problem(self) -> str:
        """The problem type: `problem_type`, else by whether the task has labels."""
        return self.problem_type or (SINGLE_LABEL if self.labels else REGRESSION)

    @property
    def is_regression(self) -> bool:
        return self.problem == REGRESSION

    @property
    def is_multi_label(self) -> bool:
        return self.problem == MULTI_LABEL

    @property
    def num_labels(self) -> int:
        """Width of the model's output: the number of classes, or 1 for regression."""
        return 1 if self.is_regression else len(self.labels)

    @property
    def label_list(self) -> list[str] | None:
        """Labels for `convert_single_example`; None for regression."""
        return None if self.is_regression else list(self.labels)

    def split(self, name: str) -> SplitSpec:
        """Returns the split called `name`, or raises ValueError listing the task's splits."""
        for split in self.splits:
            if split.name == name:
                return split
        valid = ", ".join(s.name for s in self.splits)
        raise ValueError(f"Task {self.name!r} has no split {name!r}; its splits: {valid}")

    def splits_for(self, role: Role) -> tuple[SplitSpec, ...]:
        """The task's splits of one role, in table order (MNLI matched before mismatched)."""
        return tuple(s for s in self.splits if s.role == role)


def _labelled(name: str, text_a: int, text_b: int | None, label: int, **kwargs) -> SplitSpec:
    role = "train" if name == "train" else "eval"
    kwargs.setdefault("file_name", f"{name}.tsv")
    kwargs.setdefault("guid_prefix", name)
    return SplitSpec(name=name, role=role, text_a_column=text_a, text_b_column=text_b,
                     label_column=label, **kwargs)


def _test(text_a: int, text_b: int | None, submission_file: str, **kwargs) -> SplitSpec:
    kwargs.setdefault("name", "test")
    kwargs.setdefault("file_name", f"{kwargs['name']}.tsv")
    kwargs.setdefault("guid_prefix", "test")
    return SplitSpec(role="predict", text_a_column=text_a, text_b_column=text_b,
                     index_column=0, submission_file=submission_file, **kwargs)


_BINARY = ("0", "1")
_NLI = ("contradiction", "entailment", "neutral")
_ENTAILMENT = ("entailment", "not_entailment")
# CoLA train/dev: source, label, original mark, sentence; no header.
_COLA_LAYOUT = {"has_header": False, "num_columns": 4}

TASKS: dict[str, GlueTask] = {task.name: task for task in (
    GlueTask("cola", _BINARY, MATTHEWS, (
        _labelled("train", 3, None, 1, **_COLA_LAYOUT),
        _labelled("dev", 3, None, 1, **_COLA_LAYOUT),
        _test(1, None, "CoLA.tsv"))),
    GlueTask("sst2", _BINARY, ACCURACY, (
        _labelled("train", 0, None, 1), _labelled("dev", 0, None, 1),
        _test(1, None, "SST-2.tsv"))),
    GlueTask("mrpc", _BINARY, F1, (
        _labelled("train", 3, 4, 0), _labelled("dev", 3, 4, 0), _test(3, 4, "MRPC.tsv"))),
    GlueTask("stsb", (), CORRELATION, (
        _labelled("train", 7, 8, 9), _labelled("dev", 7, 8, 9), _test(7, 8, "STS-B.tsv"))),
    GlueTask("qqp", _BINARY, F1, (
        _labelled("train", 3, 4, 5, skip_malformed=True),
        _labelled("dev", 3, 4, 5, skip_malformed=True),
        _test(1, 2, "QQP.tsv"))),
    GlueTask("mnli", _NLI, ACCURACY, (
        _labelled("train", 8, 9, -1, guid_column=0),
        _labelled("dev_matched", 8, 9, -1, guid_column=0),
        _labelled("dev_mismatched", 8, 9, -1, guid_column=0, results_suffix="_mismatched",
                  optional=True),
        _test(8, 9, "MNLI-m.tsv", name="test_matched", guid_column=0),
        _test(8, 9, "MNLI-mm.tsv", name="test_mismatched", guid_prefix="test_mismatched",
              guid_column=0, results_suffix="_mismatched", optional=True))),
    GlueTask("qnli", _ENTAILMENT, ACCURACY, (
        _labelled("train", 1, 2, 3), _labelled("dev", 1, 2, 3), _test(1, 2, "QNLI.tsv"))),
    GlueTask("rte", _ENTAILMENT, ACCURACY, (
        _labelled("train", 1, 2, 3), _labelled("dev", 1, 2, 3), _test(1, 2, "RTE.tsv"))),
    GlueTask("wnli", _BINARY, ACCURACY, (
        _labelled("train", 1, 2, 3), _labelled("dev", 1, 2, 3), _test(1, 2, "WNLI.tsv"))),
    # The diagnostic set, predicted by a model fine-tuned on MNLI (`--data_dir=.../diagnostic`).
    GlueTask("ax", _NLI, ACCURACY, (
        _test(1, 2, "AX.tsv", file_name="diagnostic.tsv"),)),
    GlueTask("xnli", _NLI, ACCURACY, (
        _labelled("train", 0, 1, 2, file_name="multinli/multinli.train.{language}.tsv",
                  skip_malformed=True),
        _labelled("dev", 6, 7, 1, file_name="xnli.dev.tsv", language_column=0)),
        label_aliases=(("contradictory", "contradiction"),)),
)}


def get_task(name: str) -> GlueTask:
    """Returns the task called `name` (case-insensitive; `SST-2` and `sst2` both work).

    Raises:
        ValueError: If there is no such task; the message lists the valid names.
    """
    key = name.lower().replace("-", "").replace("_", "")
    if key not in TASKS:
        raise ValueError(f"Unknown task {name!r}; valid tasks: {', '.join(TASKS)}")
    return TASKS[key]


def split_path(task: GlueTask, data_dir: str | os.PathLike, split_name: str,
               language: str = "zh") -> str:
    """The path of one split's file in the task folder (`read_examples`'s arguments)."""
    file_name = task.split(split_name).file_name.format(language=language)
    return os.path.join(os.fspath(data_dir), file_name)


def read_examples(task: GlueTask, data_dir: str | os.PathLike, split_name: str,
                  language: str = "zh") -> list[InputExample]:
    """Reads one split of a task from its distribution folder.

    Args:
        task: The task.
        data_dir: The task's folder (`glue_data/MRPC`, `glue_data/diagnostic`; for XNLI the
            folder of `xnli.dev.tsv` and `multinli/`).
        split_name: One of the task's split names (`train`, `dev`, `test`, `dev_mismatched`).
        language: XNLI only: the language of the training file and of the dev rows kept.

    Returns:
        The examples, in file order.

    Raises:
        FileNotFoundError: If the split's file is missing; the message gives the path.
        ValueError: On an unknown split, or a row with the wrong number of columns or a
            label outside the task's labels (the message names the file and line).
    """
    split = task.split(split_name)
    path = split_path(task, data_dir, split_name, language)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No {task.name} {split.name} file: {path} does not exist")
    examples, num_skipped = [], 0
    width = split.num_columns
    for line_number, fields in _tsv_rows(path):
        if split.has_header and line_number == 1:
            width = width or len(fields)
            _check_header_width(path, task, split, width)
            continue
        if len(fields) != width:
            if split.skip_malformed:
                num_skipped += 1
                continue
            raise ValueError(f"{path}:{line_number}: expected {width} tab-separated columns "
                             f"({task.name} {split.name} layout), found {len(fields)}")
        if split.language_column is not None and fields[split.language_column] != language:
            continue
        examples.append(_make_example(task, split, fields, path, line_number))
    if num_skipped:
        logging.warning("%s: skipped %d malformed rows (not %d columns)", path, num_skipped, width)
    return examples


def _tsv_rows(path: str) -> Iterator[tuple[int, list[str]]]:
    """Yields (1-based line number, fields) of a tab-separated UTF-8 file.

    As the original (`csv.reader(f, delimiter="\t", quotechar=None)`): quotes are ordinary
    characters, so every record is exactly one line.
    """
    with open(path, "rb") as f:
        reader = csv.reader(decoded_lines(f, path), delimiter="\t", quotechar=None)
        try:
            for fields in reader:
                yield reader.line_num, fields
        except csv.Error as e:
            raise ValueError(f"{path}:{reader.line_num}: unreadable row ({e})") from None


def decoded_lines(f: BinaryIO, path: str) -> Iterator[str]:
    """The lines of a UTF-8 file opened in binary, an invalid one named by file and line."""
    for line_number, raw in enumerate(f, start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"{path}:{line_number}: not valid UTF-8 ({e.reason} at byte "
                             f"{e.start})") from None
        # GLUE's MRPC files begin with a byte order mark.
        yield line.removeprefix("\ufeff") if line_number == 1 else line


def _check_header_width(path: str, task: GlueTask, split: SplitSpec, width: int) -> None:
    columns = [split.text_a_column, split.text_b_column, split.label_column, split.guid_column,
               split.index_column, split.language_column]
    needed = max(c + 1 if c >= 0 else -c for c in columns if c is not None)
    if width < needed:
        raise ValueError(f"{path}:1: the header has {width} columns; the {task.name} {split.name} "
                         f"layout needs at least {needed}")


def _make_example(task: GlueTask, split: SplitSpec, fields: list[str], path: str,
                  line_number: int) -> InputExample:
    guid_suffix = line_number - 1 if split.guid_column is None else fields[split.guid_column]
    # Unlabelled examples carry a placeholder label, as in the original.
    label = task.labels[0] if task.labels else "0"
    if split.label_column is not None:
        label = _checked_label(task, fields[split.label_column], path, line_number)
    text_b = None if split.text_b_column is None else fields[split.text_b_column]
    index = None if split.index_column is None else fields[split.index_column]
    return InputExample(guid=f"{split.guid_prefix}-{guid_suffix}",
                        text_a=fields[split.text_a_column], text_b=text_b, label=label,
                        index=index)


def _checked_label(task: GlueTask, label: str, path: str, line_number: int) -> str:
    label = dict(task.label_aliases).get(label, label)
    shown = label if len(label) <= 40 else label[:40] + "..."
    if task.is_regression:
        try:
            float(label)
        except ValueError:
            raise ValueError(f"{path}:{line_number}: {task.name} score {shown!r} is not a "
                             "number") from None
    elif label not in task.labels:
        raise ValueError(f"{path}:{line_number}: label {shown!r} is not one of the "
                         f"{task.name} labels {list(task.labels)}")
    return label
