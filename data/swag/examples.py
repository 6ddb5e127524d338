"""SWAG multiple choice (BERT paper section 4.4): reader, features, predictions file, accuracy.

The distribution's `train.csv`, `val.csv` and `test.csv` share the header
`,video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label`
(the first, unnamed column is a row index; `test.csv` has no `label`). `sent1` is the
context, `sent2` the start of the next sentence and `endingN` its four candidate endings.
Each example becomes four sequences `[CLS] sent1 [SEP] sent2 ending_i [SEP]`; the model
scores each from its pooled output and takes a softmax over the four.
"""
from __future__ import annotations

import csv
import dataclasses
import io
import os
from typing import Sequence

import numpy as np

from data import features as model_inputs, tokenization
from utils import output_files

NUM_CHOICES = 4
_ENDING_COLUMNS = tuple(f"ending{i}" for i in range(NUM_CHOICES))
_REQUIRED_COLUMNS = ("sent1", "sent2") + _ENDING_COLUMNS
_LABEL_COLUMN = "label"


@dataclasses.dataclass(frozen=True)
class SwagExample:
    """One SWAG question.

    Attributes:
        example_id: The row's unnamed index column, or its 0-based row number where the
            file has no such column.
        context_sentence: `sent1`.
        start_ending: `sent2`, the start every ending continues.
        endings: The four candidate endings.
        label: Index of the correct ending; None for unlabelled (test) data.
    """

    example_id: str
    context_sentence: str
    start_ending: str
    endings: tuple[str, ...]
    label: int | None


def _column_positions(header: Sequence[str], path: str) -> dict[str, int]:
    positions = {name: index for index, name in enumerate(header)}
    missing = [name for name in _REQUIRED_COLUMNS if name not in positions]
    if missing:
        raise ValueError(f"{path}:1: header lacks the SWAG columns {missing}; found {list(header)}")
    return positions


def _parse_label(value: str, path: str, line: int) -> int:
    try:
        label = int(value)
    except ValueError:
        label = -1
    if not 0 <= label < NUM_CHOICES:
        raise ValueError(f"{path}:{line}: label {value!r} is not an ending index "
                         f"0..{NUM_CHOICES - 1}")
    return label


def read_swag_examples(path: str | os.PathLike, require_labels: bool = False) -> list[SwagExample]:
    """Reads a SWAG distribution CSV (`train.csv`, `val.csv` or `test.csv`).

    Args:
        path: The CSV file, with its header row.
        require_labels: Whether the file must have a `label` column (training, evaluation).

    Returns:
        The examples in file order; `label` is None when the file has no `label` column.

    Raises:
        ValueError: Naming the file and line, if the header lacks a needed column, or a row
            has another field count than the header (so not four endings) or a label
            outside 0..3.
    """
    path = os.fspath(path)
    # utf-8-sig: a byte-order mark must not hide the unnamed index column.
    with open(path, encoding="utf-8-sig", newline="") as reader:
        rows = csv.reader(reader)
        header = next(rows, None)
        if header is None:
            raise ValueError(f"{path}: empty file, expected a SWAG header row")
        positions = _column_positions(header, path)
        has_label = _LABEL_COLUMN in positions
        if require_labels and not has_label:
            raise ValueError(f"{path}:1: no {_LABEL_COLUMN!r} column, but labels are needed")
        has_index_column = header[0] == ""
        examples = []
        line = rows.line_num + 1
        for row in rows:
            # A quoted field may span lines: report the line where the row starts.
            row_line, line = line, rows.line_num + 1
            if not row:
                continue
            if len(row) != len(header):
                raise ValueError(f"{path}:{row_line}: expected {len(header)} fields "
                                 f"({', '.join(_REQUIRED_COLUMNS)}, ...), found {len(row)}")
            examples.append(SwagExample(
                example_id=row[0] if has_index_column else str(len(examples)),
                context_sentence=row[positions["sent1"]],
                start_ending=row[positions["sent2"]],
                endings=tuple(row[positions[name]] for name in _ENDING_COLUMNS),
                label=(_parse_label(row[positions[_LABEL_COLUMN]], path, row_line)
                       if has_label else None)))
    return examples


def convert_examples_to_arrays(examples: Sequence[SwagExample],
                               tokenizer: tokenization.FullTokenizer,
                               max_seq_length: int) -> dict[str, np.ndarray]:
    """Builds the four sequences `[CLS] context [SEP] start ending [SEP]` of every example, both
    parts cut longest-first as the original's `_truncate_seq_pair` (`data.features`); an empty
    second part keeps its `[SEP]`, as in the SWAG code BERT's authors ran.

    Args:
        examples: SWAG examples.
        tokenizer: WordPiece tokenizer.
        max_seq_length: Length T of every sequence (at least 3).

    Returns:
        Arrays keyed by the TFRecord schema names, for `tf.data`: `input_ids`,
        `input_mask`, `segment_ids` int32 [N, 4, T] (zero-padded), and `label_ids`
        int32 [N] (0 for unlabelled examples, as the original does for test data).
    """
    if max_seq_length < 3:
        raise ValueError(f"max_seq_length must be at least 3, got {max_seq_length}")
    sequences = []
    for example in examples:
        context_tokens = tokenizer.tokenize(example.context_sentence)
        start_tokens = tokenizer.tokenize(example.start_ending)
        for ending in example.endings:
            tokens_a, tokens_b = list(context_tokens), start_tokens + tokenizer.tokenize(ending)
            model_inputs.truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 3)
            sequences.append(model_inputs.encode(
                *model_inputs.sequence_tokens(tokens_a, tokens_b, pair=True), tokenizer,
                max_seq_length))
    arrays = {name: values.reshape(len(examples), NUM_CHOICES, max_seq_length)
              for name, values in model_inputs.stack(sequences).items()}
    arrays["label_ids"] = np.asarray([example.label or 0 for example in examples], dtype=np.int32)
    return arrays


def _check_probabilities(examples: Sequence[SwagExample], probabilities: np.ndarray) -> np.ndarray:
    probabilities = np.asarray(probabilities)
    if probabilities.shape != (len(examples), NUM_CHOICES):
        raise ValueError(f"Expected probabilities of shape ({len(examples)}, {NUM_CHOICES}), "
                         f"got {probabilities.shape}")
    return probabilities


def accuracy(examples: Sequence[SwagExample], probabilities: np.ndarray) -> float:
    """Fraction of examples whose most probable ending is the labelled one.

    Args:
        examples: Labelled examples.
        probabilities: float [N, 4] per-ending probabilities (or any scores).

    Raises:
        ValueError: If the shapes disagree or an example has no label.
    """
    probabilities = _check_probabilities(examples, probabilities)
    if any(example.label is None for example in examples):
        raise ValueError("Accuracy needs labelled examples")
    if not examples:
        return 0.0
    labels = np.asarray([example.label for example in examples])
    return float(np.mean(np.argmax(probabilities, axis=1) == labels))


def write_predictions(path: str | os.PathLike, examples: Sequence[SwagExample],
                      probabilities: np.ndarray) -> None:
    """Writes one CSV row per example: `id,prob0,prob1,prob2,prob3,prediction`, atomically.

    Args:
        path: Output file.
        examples: The examples, in the order of `probabilities`.
        probabilities: float [N, 4] softmax over each example's endings.

    Raises:
        ValueError: Before writing anything, if the shapes disagree.
    """
    probabilities = _check_probabilities(examples, probabilities)
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(["id"] + [f"prob{i}" for i in range(NUM_CHOICES)] + ["prediction"])
    for example, row in zip(examples, probabilities):
        writer.writerow([example.example_id] + [f"{float(p):.9g}" for p in row]
                        + [int(np.argmax(row))])
    output_files.write_text_atomically(path, text.getvalue())
