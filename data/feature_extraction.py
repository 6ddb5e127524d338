"""Inputs and outputs of `extract_features.py`, in the original script's formats.

Input: one example a line, a pair written `text_a ||| text_b`, each one sequence
(`data.features.text_sequence`). Output: one JSON object a line,
`{"linex_index", "features": [{"token", "layers": [{"index", "values"}]}]}`, values rounded to six
decimals, for the real tokens only.
"""
from __future__ import annotations

import json
from typing import Iterator, Sequence

import numpy as np

from data import tokenization


def read_lines(path: str) -> Iterator[str]:
    """Yields each line of `path`, decoded as the original decodes it."""
    with open(path, "rb") as f:
        for raw in f:
            yield tokenization.convert_to_unicode(raw)


def format_output_line(line_index: int, tokens: Sequence[str], layer_indexes: Sequence[int],
                       layer_outputs: Sequence[np.ndarray]) -> str:
    """One JSON line of the original's output.

    Args:
        line_index: the line's number, from 0.
        tokens: the line's real tokens.
        layer_indexes: the `--layers` values, e.g. [-1, -2].
        layer_outputs: for each layer index, float [T, H] activations of this example.
    """
    found = []
    for position, token in enumerate(tokens):
        layers = [{"index": index, "values": [round(float(x), 6) for x in output[position]]}
                  for index, output in zip(layer_indexes, layer_outputs)]
        found.append({"token": token, "layers": layers})
    return json.dumps({"linex_index": line_index, "features": found}) + "\n"


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
