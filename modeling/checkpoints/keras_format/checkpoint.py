"""The `keras` format: this project's TF2 object-based checkpoints, the model under the root key
`model`.

Training runs write them (with optimizer state, step and input position beside the model) and
`convert_checkpoint.py --to keras` writes them (model only). Any of the project's models can be read
from any other's checkpoint through the shared `encoder` child; heads are matched by their names.
"""
from __future__ import annotations

import keras
import tensorflow as tf

from modeling.checkpoints.errors import (CheckpointMismatchError, CorruptCheckpointError,
                                         UnsupportedCheckpointError)
from modeling.checkpoints.model_specs import ENCODER, ModelSpec
from modeling.checkpoints.tf1.checkpoint import open_checkpoint, readable_checkpoint
from modeling.models.encoder import BertEncoder

OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
# Where a variable of the model lives in a keras checkpoint's object graph.
_VARIABLE_KEY = "model/{}/.ATTRIBUTES/VARIABLE_VALUE"


def is_object_based(reader: tf.train.CheckpointReader) -> bool:
    """True for an object-based (TF2) checkpoint, False for a name-based (TF1) one."""
    return reader.has_tensor(OBJECT_GRAPH_KEY)


def _bind(model: keras.Model) -> tf.train.Checkpoint:
    # A bare encoder is read from the `encoder` child of whatever model wrote the checkpoint.
    if isinstance(model, BertEncoder):
        return tf.train.Checkpoint(model=tf.train.Checkpoint(encoder=model))
    return tf.train.Checkpoint(model=model)


def load_keras_checkpoint(model: keras.Model, prefix: str) -> None:
    """Restores every variable of `model` from a keras checkpoint, all or nothing.

    Raises:
        CheckpointMismatchError: a variable the model needs is missing or has another shape.
        CorruptCheckpointError: the checkpoint's files cannot be read.
        Either way the model's values are then those it had before the call.
    """
    snapshot = [variable.numpy() for variable in model.weights]
    try:
        with readable_checkpoint(prefix):
            status = _bind(model).read(prefix)
            status.expect_partial()
            status.assert_existing_objects_matched()
    except (AssertionError, ValueError) as error:
        for variable, value in zip(model.weights, snapshot):
            variable.assign(value)
        if isinstance(error, CorruptCheckpointError):
            raise
        raise CheckpointMismatchError(
            f"checkpoint {prefix} does not fit the model: {error}") from None


def save_keras_checkpoint(model: keras.Model, prefix: str) -> str:
    """Writes the model (no optimizer state) as a keras checkpoint; returns the path written.

    A bare encoder is written as the `encoder` child of `model`, as training runs write it.
    """
    return _bind(model).write(prefix)


def keras_model_spec(prefix: str, head: str | None = None,
                     reader: tf.train.CheckpointReader | None = None) -> ModelSpec:
    """The model a keras checkpoint belongs to, from its object graph's keys.

    Args:
        prefix: the checkpoint.
        head: the head, where the caller knows it; the label count is still read.
        reader: the checkpoint, already open; opened from `prefix` when None.

    Raises:
        UnsupportedCheckpointError: the head is a classifier, a span labeler or a token
            classifier (the same variables) and `head` does not say which.
    """
    shapes = (reader or open_checkpoint(prefix)).get_variable_to_shape_map()
    weights = shapes.get(_VARIABLE_KEY.format("head/output_weights"))
    if head is None:
        if _VARIABLE_KEY.format("masked_lm/output_bias") in shapes:
            head = ("pretraining" if _VARIABLE_KEY.format("next_sentence/output_bias") in shapes
                    else "masked_lm")
        elif weights is None:
            head = ENCODER
        elif _VARIABLE_KEY.format("head/output_bias") not in shapes:
            head = "multiple_choice"
        else:
            raise UnsupportedCheckpointError(
                f"{prefix}: its head may be a classifier, a span labeler or a token classifier "
                "and it has no model_spec.json beside it; pass --head")
    takes_labels = head in ("classifier", "token_classifier")
    return ModelSpec(head, int(weights[0]) if takes_labels and weights else None)
