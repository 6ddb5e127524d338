"""Model inputs of every task, built one way: `[CLS] A [SEP] (B [SEP])`, its segment ids and input
mask, zero-padded to `max_seq_length`, and stacked into arrays keyed by the TFRecord schema's names.

As the original's `convert_single_example`: segment 0 for `[CLS] A [SEP]`, 1 for `B [SEP]`; a pair
too long is truncated longest-first (`truncate_seq_pair`), a single text cut at its end. Every task
makes its sequences here: sentence (pair) classification and SWAG (context, and an ending) through
`truncated_sequence`; SQuAD (a question, and a window of its context) and NER (one segment: a
sentence amid its context, or a window of it) through `encode`; a line of new text,
`text_a ||| text_b`, through `text_sequence`, or `text_windows` for a text longer than a sequence
(`data.windows.pair_windows`).
"""
from __future__ import annotations

import dataclasses
import re
from typing import Iterable, Sequence

import numpy as np

from data import tokenization, windows
from data.tfrecord_schema import ENCODER_INPUTS

_PAIR = re.compile(r"^(.*) \|\|\| (.*)$")


@dataclasses.dataclass(frozen=True)
class EncodedSequence:
    """One sequence's model inputs.

    Attributes:
        tokens: the real tokens, `[CLS]` ... `[SEP]`, without padding.
        input_ids: their ids, zero-padded to `max_seq_length`.
        input_mask: 1 for the real tokens, 0 for padding.
        segment_ids: 0 for `[CLS] A [SEP]`, 1 for `B [SEP]`, 0 for padding.
    """

    tokens: list[str]
    input_ids: list[int]
    input_mask: list[int]
    segment_ids: list[int]


def truncate_seq_pair(tokens_a: list[str], tokens_b: list[str], max_length: int) -> None:
    """Pops tokens off the end of the longer list (B on ties) until both fit `max_length`.

    Longest-first keeps as much of the shorter text as possible; it changes the lists in place.
    """
    while len(tokens_a) + len(tokens_b) > max_length:
        if len(tokens_a) > len(tokens_b):
            tokens_a.pop()
        else:
            tokens_b.pop()


def sequence_tokens(tokens_a: Sequence[str], tokens_b: Sequence[str] | None = None,
                    pair: bool = False) -> tuple[list[str], list[int]]:
    """`[CLS] A [SEP]`, and `B [SEP]` where B has tokens (or, with `pair`, always: SWAG's
    sequences), with their segment ids."""
    tokens = [tokenization.CLS, *tokens_a, tokenization.SEP]
    segment_ids = [0] * len(tokens)
    if tokens_b or pair:
        tokens_b = tokens_b or ()
        tokens += [*tokens_b, tokenization.SEP]
        segment_ids += [1] * (len(tokens_b) + 1)
    return tokens, segment_ids


def truncated_tokens(tokens_a: Sequence[str], tokens_b: Sequence[str] | None,
                     max_seq_length: int) -> tuple[list[str], list[int]]:
    """`sequence_tokens` of A and B cut to `max_seq_length`: a pair longest-first (room for
    three special tokens), a single text at its end (room for two). The inputs are not changed.
    As in the original, a B without tokens makes a single-text sequence."""
    tokens_a, tokens_b = list(tokens_a), list(tokens_b or ())
    if tokens_b:
        truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 3)
    else:
        tokens_a = tokens_a[:max_seq_length - 2]
    return sequence_tokens(tokens_a, tokens_b)


def encode(tokens: list[str], segment_ids: Sequence[int], tokenizer: tokenization.FullTokenizer,
           max_seq_length: int) -> EncodedSequence:
    """The ids, input mask and segment ids of `tokens`, zero-padded to `max_seq_length`.

    Raises:
        ValueError: more tokens than `max_seq_length`.
    """
    if len(tokens) > max_seq_length:
        raise ValueError(f"{len(tokens)} tokens do not fit max_seq_length={max_seq_length}")
    padding = [0] * (max_seq_length - len(tokens))
    return EncodedSequence(tokens, tokenizer.convert_tokens_to_ids(tokens) + padding,
                           [1] * len(tokens) + padding, list(segment_ids) + padding)


def truncated_sequence(tokens_a: Sequence[str], tokens_b: Sequence[str] | None,
                       tokenizer: tokenization.FullTokenizer,
                       max_seq_length: int) -> EncodedSequence:
    """`encode` of `truncated_tokens`: the original's sequence of a text (pair)."""
    return encode(*truncated_tokens(tokens_a, tokens_b, max_seq_length), tokenizer,
                  max_seq_length)


def stack(rows: Sequence[object], names: Iterable[str] = ENCODER_INPUTS,
          dtype: type = np.int32) -> dict[str, np.ndarray]:
    """Arrays [N, ...] of the attributes `names` of `rows` (`EncodedSequence`s, or any records
    with those attributes), keyed by those names, for `tf.data` and the model.

    Raises:
        ValueError: rows of different lengths.
    """
    arrays = {}
    for name in names:
        values = [getattr(row, name) for row in rows]
        lengths = {len(value) for value in values if isinstance(value, (list, tuple))}
        if len(lengths) > 1:
            raise ValueError(f"{name}: rows of different sequence lengths {sorted(lengths)}")
        arrays[name] = np.asarray(values, dtype=dtype)
    return arrays


def split_pair(line: str) -> tuple[str, str | None]:
    """A line of new text: `text_a ||| text_b` is a pair, anything else a single text."""
    line = line.strip()
    match = _PAIR.match(line)
    return (match.group(1), match.group(2)) if match else (line, None)


def text_sequence(text: str, tokenizer: tokenization.FullTokenizer,
                  max_seq_length: int) -> tuple[EncodedSequence, bool]:
    """The sequence of a line of new text (`split_pair`), as the original builds a classifier's,
    and whether its text was truncated to fit."""
    text_a, text_b = split_pair(text)
    tokens_a = tokenizer.tokenize(text_a)
    tokens_b = tokenizer.tokenize(text_b) if text_b else []
    room = max_seq_length - (3 if tokens_b else 2)
    return (truncated_sequence(tokens_a, tokens_b, tokenizer, max_seq_length),
            len(tokens_a) + len(tokens_b) > room)


def text_windows(text: str, tokenizer: tokenization.FullTokenizer, max_seq_length: int,
                 doc_stride: int | None = None) -> list[EncodedSequence]:
    """A line of new text's sequences: its `text_sequence` when it fits, else one per window of
    `data.windows.pair_windows` (a pair too long for windows of both sides is truncated
    longest-first, as the original truncates)."""
    text_a, text_b = split_pair(text)
    tokens_a = tokenizer.tokenize(text_a)
    tokens_b = tokenizer.tokenize(text_b) if text_b else []
    room = max_seq_length - (3 if tokens_b else 2)
    if tokens_b and room < 2:
        truncate_seq_pair(tokens_a, tokens_b, room)
    return [encode(*sequence_tokens(window_a, window_b), tokenizer, max_seq_length)
            for window_a, window_b in windows.pair_windows(tokens_a, tokens_b, room, doc_stride)]
