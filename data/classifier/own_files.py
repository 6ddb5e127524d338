"""A user's own classification files: CSV, TSV or JSON lines, columns named by the user.

`run_classifier.py --train_file --dev_file --test_file` reads them instead of a GLUE task's
folder. Each file is read by its extension (`.csv`, `.tsv`, `.jsonl` / `.json`) unless a format
is given; its columns are named by header (a CSV or TSV file's first row, a JSON line's keys) or,
for CSV and TSV files without a header, given by index (0 is the first). A row's label is a class
name (`single_label`), class names joined by a separator (`multi_label`; a JSON line may hold a
list; an empty label is a row with no class) or a number (`regression`).

The task row (`task_row`) is built from these files and flags, as GLUE's rows are data: its labels
(`--label_list`, else every label of the training file, sorted), its problem type and its splits.
Every error names the file, the line and the value.
"""
from __future__ import annotations

import csv
import dataclasses
import json
import os
from typing import Iterator, Sequence

from data.classifier import glue_tasks
from data.classifier.features import InputExample

FORMATS = ("csv", "tsv", "jsonl")
SINGLE_LABEL, MULTI_LABEL, REGRESSION = (glue_tasks.SINGLE_LABEL, glue_tasks.MULTI_LABEL,
                                         glue_tasks.REGRESSION)
# The file of each role, and the name of its split (eval_results.txt, test_results.tsv, ...).
ROLE_SPLITS = {"train": "train", "eval": "dev", "predict": "test"}
_EXTENSIONS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".json": "jsonl"}
_SHOWN = 60  # characters of a value shown in an error


@dataclasses.dataclass(frozen=True)
class Columns:
    """Where a row's fields are: header names, or indexes (as strings of digits) for CSV and TSV
    files without a header. `text_pair`, `label` (unlabelled test files) and `id` (read from the
    test file, for predictions.jsonl) are optional."""

    text: str
    text_pair: str | None = None
    label: str | None = "label"
    id: str | None = None

    @property
    def by_index(self) -> bool:
        """Whether the columns are indexes (the file has no header)."""
        return self.text.isdigit()

    def check(self) -> None:
        """Raises ValueError when some columns are indexes and others names."""
        given = [c for c in (self.text, self.text_pair, self.label, self.id) if c is not None]
        if any(c.isdigit() for c in given) and not all(c.isdigit() for c in given):
            raise ValueError(f"--text_column, --text_pair_column, --label_column, --id_column: "
                             f"all names (a file with a header) or all indexes (a file without "
                             f"one), not a mix: {given}")


@dataclasses.dataclass(frozen=True)
class OwnFiles:
    """The files of a run and how to read them (run_classifier.py's file flags).

    Attributes:
        paths: the file of each role present ("train", "eval", "predict").
        columns: where the fields are.
        problem_type: single_label, multi_label or regression.
        file_format: csv, tsv or jsonl for every file; None: by each file's extension.
        label_separator: what joins a multi-label row's labels.
        label_list: the labels in class-index order; None: those of the training file, sorted
            (without training, those saved beside the model).
    """

    paths: dict[str, str]
    columns: Columns
    problem_type: str = SINGLE_LABEL
    file_format: str | None = None
    label_separator: str = ","
    label_list: tuple[str, ...] | None = None

    def format_of(self, path: str) -> str:
        """The format of `path`: `file_format`, else its extension's."""
        if self.file_format:
            return self.file_format
        extension = os.path.splitext(path)[1].lower()
        if extension not in _EXTENSIONS:
            raise ValueError(f"{path}: cannot tell the format from the extension "
                             f"{extension or '(none)'!r}; name it with --file_format "
                             f"({', '.join(FORMATS)})")
        return _EXTENSIONS[extension]


def _shown(value: object) -> str:
    text = str(value)
    return repr(text if len(text) <= _SHOWN else text[:_SHOWN] + "...")


def _rows(path: str, file_format: str, by_index: bool) -> Iterator[tuple[int, object]]:
    """(1-based line number, row) of a file: a dict for a header or a JSON line, else a list."""
    with open(path, "rb") as f:
        lines = glue_tasks.decoded_lines(f, path)
        if file_format == "jsonl":
            for number, line in enumerate(lines, start=1):
                if line.strip():
                    yield number, _json_row(line, path, number)
            return
        reader = csv.reader(lines, delimiter="," if file_format == "csv" else "\t",
                            strict=True)
        header = None
        try:
            for fields in reader:
                if header is None and not by_index:
                    header = fields
                    continue
                if not fields or not any(field.strip() for field in fields):
                    continue
                yield reader.line_num, fields if by_index else _named(header, fields, path,
                                                                      reader.line_num)
        except csv.Error as error:
            raise ValueError(f"{path}:{reader.line_num}: unreadable row ({error})") from None


def _json_row(line: str, path: str, number: int) -> dict:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}:{number}: unreadable JSON line ({error.msg})") from None
    if not isinstance(row, dict):
        raise ValueError(f"{path}:{number}: a JSON line must be an object, found "
                         f"{type(row).__name__}")
    return row


def _named(header: list[str], fields: list[str], path: str, number: int) -> dict:
    if len(fields) != len(header):
        raise ValueError(f"{path}:{number}: {len(fields)} fields where the header has "
                         f"{len(header)} columns")
    return dict(zip(header, fields))


def _field(row: object, column: str, path: str, number: int) -> object:
    """The value of `column` in a row (a dict by name, a list by index)."""
    if isinstance(row, dict):
        if column not in row:
            raise ValueError(f"{path}:{number}: no column {column!r} (its columns: "
                             f"{', '.join(map(repr, row)) or 'none'})")
        return row[column]
    index = int(column)
    if index >= len(row):
        raise ValueError(f"{path}:{number}: no column {index}: the row has {len(row)} fields")
    return row[index]


def _text(row: object, column: str, path: str, number: int) -> str:
    value = _field(row, column, path, number)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{path}:{number}: empty text in column {column!r}" if
                         isinstance(value, str) or value is None else
                         f"{path}:{number}: column {column!r} holds {_shown(value)}, not a text")
    return value


def _labels(value: object, files: OwnFiles, path: str, number: int) -> str | tuple[str, ...]:
    """A row's label: a class name, a tuple of class names, or a number's text."""
    if files.problem_type == MULTI_LABEL:
        names = value if isinstance(value, list) else str(value).split(files.label_separator)
        return tuple(sorted({str(name).strip() for name in names if str(name).strip()}))
    if isinstance(value, (list, dict)) or value is None or not str(value).strip():
        raise ValueError(f"{path}:{number}: label {_shown(value)} is not "
                         + ("a number" if files.problem_type == REGRESSION else "a class name"))
    label = str(value).strip()
    if files.problem_type == REGRESSION:
        try:
            float(label)
        except ValueError:
            raise ValueError(f"{path}:{number}: regression label {_shown(label)} is not a "
                             "number") from None
    return label


def read_file(files: OwnFiles, role: str, labels: Sequence[str] | None) -> list[InputExample]:
    """The examples of one role's file, in order; a labelled role's labels are checked against
    `labels` (None: not checked, for the training file whose labels make the list).

    Raises:
        FileNotFoundError: the file is missing.
        ValueError: a row that cannot be read, a missing column, an empty text, a label outside
            `labels`, a regression label that is not a number; the message names file and line.
    """
    path = files.paths[role]
    if not os.path.isfile(path):
        raise FileNotFoundError(f"--{ROLE_SPLITS[role]}_file={path} does not exist")
    columns = files.columns
    file_format = files.format_of(path)
    if columns.by_index and file_format == "jsonl":
        raise ValueError(f"{path}: a JSON lines file's columns are its keys, not indexes")
    known = set(labels) if labels is not None else None
    examples = []
    for number, row in _rows(path, file_format, columns.by_index):
        label = _placeholder(files.problem_type, labels)
        if role != "predict" or _has(row, columns.label):
            if columns.label is None:
                raise ValueError(f"--label_column is needed to read {path}")
            label = _labels(_field(row, columns.label, path, number), files, path, number)
            _check_known(label, known, files.problem_type, path, number)
        examples.append(InputExample(
            guid=f"{ROLE_SPLITS[role]}-{len(examples)}",
            text_a=_text(row, columns.text, path, number),
            text_b=_text(row, columns.text_pair, path, number) if columns.text_pair else None,
            label=label, index=str(_field(row, columns.id, path, number))
            if columns.id and role == "predict" else None))
    if not examples:
        raise ValueError(f"{path}: no rows (empty, or only a header)")
    return examples


def _placeholder(problem_type: str, labels: Sequence[str] | None) -> str | tuple[str, ...]:
    """The label an unlabelled test row carries, as the original gives its test examples the
    task's first label: the first label, no label (multi-label), or 0 (regression)."""
    if problem_type == MULTI_LABEL:
        return ()
    return labels[0] if problem_type == SINGLE_LABEL and labels else "0"


def _has(row: object, column: str | None) -> bool:
    """Whether an unlabelled role's row has the label column (a test file may carry labels)."""
    if column is None:
        return False
    return column in row if isinstance(row, dict) else int(column) < len(row)


def _check_known(label: str | tuple[str, ...], known: set[str] | None, problem_type: str,
                 path: str, number: int) -> None:
    if known is None or problem_type == REGRESSION:
        return
    for name in (label if isinstance(label, tuple) else (label,)):
        if name not in known:
            raise ValueError(f"{path}:{number}: label {_shown(name)} is not one of the labels "
                             f"{sorted(known) if len(known) <= 20 else len(known)} (those of "
                             "the training file, --label_list, or saved beside the model)")


def labels_of(examples: Sequence[InputExample], problem_type: str) -> tuple[str, ...]:
    """Every label of the examples, sorted; none for regression."""
    if problem_type == REGRESSION:
        return ()
    found = set()
    for example in examples:
        found.update(example.label if isinstance(example.label, tuple) else (example.label,))
    return tuple(sorted(found - {None}))


def task_row(files: OwnFiles, labels: Sequence[str]) -> glue_tasks.GlueTask:
    """The task of the files, a row as GLUE's: its labels, metric and one split per file."""
    splits = tuple(glue_tasks.SplitSpec(
        name=ROLE_SPLITS[role], role=role, file_name=path, guid_prefix=ROLE_SPLITS[role],
        text_a_column=0) for role, path in files.paths.items())
    return glue_tasks.GlueTask("own files", tuple(labels), glue_tasks.EVERY_METRIC, splits,
                               problem_type=files.problem_type)
