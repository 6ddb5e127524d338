"""A smaller model initialised from some of a larger one's layers, by the original names.

DistilBERT's initialisation (Sanh et al. 2019): the student keeps the teacher's embeddings, pooler
and head, and its layer i is the teacher's layer `layers[i]`. The values go through the name
table (`names.tf1_name_map`) and the strict assignment every format uses
(`tf1.assign_tf1_values`): every variable of the student is set, or none is.
"""
from __future__ import annotations

import re
from typing import Sequence

import keras
import numpy as np

from modeling.checkpoints.names import tf1_name_map
from modeling.checkpoints.tf1.checkpoint import assign_tf1_values

_LAYER = re.compile(r"^bert/encoder/layer_(\d+)/")


def check_layers(layers: Sequence[int], num_layers: int, source: str = "the model") -> None:
    """Raises ValueError unless `layers` are distinct layers of a model of `num_layers`."""
    if not layers:
        raise ValueError("no layers given")
    outside = [layer for layer in layers if not 0 <= layer < num_layers]
    if outside:
        raise ValueError(f"layers {', '.join(map(str, outside))} are not layers of {source}, "
                         f"which has layers 0 to {num_layers - 1}")
    if len(set(layers)) != len(layers):
        raise ValueError(f"layers {', '.join(map(str, layers))}: a layer is named twice")


def layer_values(model: keras.Model, layers: Sequence[int]) -> dict[str, np.ndarray]:
    """The original-named values of `model` with its encoder cut to `layers`: layer i of the
    result is the model's layer `layers[i]`; every variable outside the layers as it is.

    Raises:
        ValueError: `layers` are not distinct layers of the model.
    """
    check_layers(layers, model.config.num_hidden_layers)
    new_index = {old: new for new, old in enumerate(layers)}
    values = {}
    for name, variable in tf1_name_map(model).items():
        match = _LAYER.match(name)
        if match is None:
            values[name] = variable.numpy()
        elif int(match.group(1)) in new_index:
            renamed = f"bert/encoder/layer_{new_index[int(match.group(1))]}/{name[match.end():]}"
            values[renamed] = variable.numpy()
    return values


def copy_layers(source: keras.Model, target: keras.Model, layers: Sequence[int],
                description: str = "the teacher") -> None:
    """Assigns `target` (a model of `len(layers)` layers, with `source`'s head and widths) the
    values of `source` cut to `layers` (`layer_values`), all or nothing.

    Raises:
        ValueError: `layers` are not distinct layers of `source`.
        CheckpointMismatchError: a variable of `target` is missing or has another shape.
    """
    check_layers(layers, source.config.num_hidden_layers, description)
    assign_tf1_values(target, layer_values(source, layers),
                      f"layers {', '.join(map(str, layers))} of {description}")
