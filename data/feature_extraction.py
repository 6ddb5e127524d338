"""Inputs and outputs of `extract_features.py`, in the original script's formats.

Input: one example a line, a pair written `text_a ||| text_b`. Output: one JSON object a line,
`{"linex_index", "features": [{"token", "layers": [{"index", "values"}]}]}`, values rounded to six
decimals, for the real tokens only.
"""
from __future__ import annotations

import dataclasses
import json
import re
from typing import Iterator, Sequence

import numpy as np

from data import tokenization
from data.tfrecord_schema import ENCODER_INPUTS
from data.classifier.features import InputExample, example_tokens

_PAIR = re.compile(r"^(.*) \|\|\| (.*)$")


@dataclasses.dataclass(frozen=True)
class ExtractionFeatures:
    """One line's model inputs; `tokens` are the real tokens, the arrays zero-padded to T."""

    unique_id: int
    tokens: list[str]
    input_ids: list[int]
    input_mask: list[int]
    segment_ids: list[int]


def read_examples(path: str) -> Iterator[InputExample]:
    """Yields one example per line (stripped), numbered from 0; ` ||| ` splits a pair."""
    with open(path, "rb") as f:
        for unique_id, raw in enumerate(f):
            yield text_example(unique_id, tokenization.convert_to_unicode(raw))


def text_example(unique_id: int, text: str) -> InputExample:
    """One line's example: `text_a ||| text_b` is a pair, anything else a single text."""
    line = text.strip()
    match = _PAIR.match(line)
    text_a, text_b = (match.group(1), match.group(2)) if match else (line, None)
    return InputExample(guid=str(unique_id), text_a=text_a, text_b=text_b)


def convert_example(example: InputExample, max_seq_length: int,
                    tokenizer: tokenization.FullTokenizer) -> ExtractionFeatures:
    """`[CLS] A [SEP] (B [SEP])`, pairs truncated longest-first, zero-padded to max_seq_length."""
    tokens, segment_ids = example_tokens(example, max_seq_length, tokenizer)
    input_ids = tokenizer.convert_tokens_to_ids(tokens)
    padding = [0] * (max_seq_length - len(tokens))
    return ExtractionFeatures(
        unique_id=int(example.guid), tokens=tokens, input_ids=input_ids + padding,
        input_mask=[1] * len(tokens) + padding, segment_ids=segment_ids + padding)


def features_to_arrays(features: Sequence[ExtractionFeatures]) -> dict[str, np.ndarray]:
    """Stacks a batch into int32 [B, T] arrays keyed `input_ids`, `input_mask`, `segment_ids`."""
    return {name: np.array([getattr(f, name) for f in features], np.int32)
            for name in ENCODER_INPUTS}


def format_output_line(features: ExtractionFeatures, layer_indexes: Sequence[int],
                       layer_outputs: Sequence[np.ndarray]) -> str:
    """One JSON line of the original's output.

    Args:
        features: the line's features.
        layer_indexes: the `--layers` values, e.g. [-1, -2].
        layer_outputs: for each layer index, float [T, H] activations of this example.
    """
    tokens = []
    for position, token in enumerate(features.tokens):
        layers = [{"index": index, "values": [round(float(x), 6) for x in output[position]]}
                  for index, output in zip(layer_indexes, layer_outputs)]
        tokens.append({"token": token, "layers": layers})
    return json.dumps({"linex_index": features.unique_id, "features": tokens}) + "\n"


def parse_layer_indexes(text: str, num_layers: int) -> list[int]:
    """Parses `--layers` ("-1,-2,-3,-4"); each must address one of the model's layers."""
    try:
        indexes = [int(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(f"--layers must be comma-separated integers, got {text!r}") from None
    for index in indexes:
        if not -num_layers <= index < num_layers:
            raise ValueError(f"--layers: {index} is outside the model's {num_layers} layers")
    return indexes
