"""Which head a checkpoint carries, and the model class that holds it.

A checkpoint is described by its original TF1 variable names: the encoder's (`bert/...`) plus at
most one head's. Head variables are those of `names.HEAD_TABLE`, grouped by the Keras
layer that owns them; the classifier's and token classifier's label counts are the rows of their
`output_weights`. Anything else is an error that names it, so that no weight is silently dropped.

`model_spec.json` beside a checkpoint records its spec (and the tokenizer's casing where known);
`write_model_spec` is its one writer.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
from typing import Any, NamedTuple, Sequence

import keras

from modeling.checkpoints.errors import UnsupportedCheckpointError
from modeling.checkpoints.names import ENCODER_TABLE, HEAD_TABLE, is_optimizer_state
from modeling.config import BertConfig
from modeling.models.encoder import BertEncoder
from modeling.models.pretrainer import BertMaskedLM, BertPretrainer
from modeling.models.task_models import (BertClassifier, BertMultipleChoice, BertSpanLabeler,
                                         BertTokenClassifier)
from utils.output_files import write_text_atomically

ENCODER = "encoder"
# (head, Keras layers holding its variables, model class, takes num_labels).
HEADS = (
    (ENCODER, (), BertEncoder, False),
    ("pretraining", ("masked_lm", "next_sentence"), BertPretrainer, False),
    ("masked_lm", ("masked_lm",), BertMaskedLM, False),
    ("classifier", ("classifier",), BertClassifier, True),
    ("squad", ("squad",), BertSpanLabeler, False),
    ("multiple_choice", ("multiple_choice",), BertMultipleChoice, False),
    ("token_classifier", ("token_classifier",), BertTokenClassifier, True),
)
HEAD_NAMES = tuple(row[0] for row in HEADS)
SPEC_FILE = "model_spec.json"


def _head_variables() -> dict[str, tuple[str, ...]]:
    """{head: original names of its variables}; every HEAD_TABLE row belongs to a head (the
    masked-LM's to both the pretraining and the masked_lm heads)."""
    variables: dict[str, list[str]] = {head: [] for head in HEAD_NAMES}
    for tf1, keras_path in HEAD_TABLE:
        owners = [head for head, layers, _, _ in HEADS if keras_path.split("/")[0] in layers]
        if not owners:
            raise AssertionError(f"the head variable {tf1!r} belongs to no head")
        for head in owners:
            variables[head].append(tf1)
    return {head: tuple(names) for head, names in variables.items()}


HEAD_VARIABLES = _head_variables()
_ENCODER_NAME = re.compile(
    "^(" + "|".join(re.escape(tf1).replace(r"\{i\}", r"\d+") for tf1, _ in ENCODER_TABLE) + ")$")


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """The model a checkpoint belongs to: its head and, for classifiers, the label count."""

    # One of HEAD_NAMES; "encoder" for a bare encoder.
    head: str
    # Rows of the classifier's or token classifier's output_weights; None for other heads.
    num_labels: int | None = None

    def __post_init__(self):
        if self.head not in HEAD_NAMES:
            raise ValueError(f"unknown head {self.head!r}; valid heads: {', '.join(HEAD_NAMES)}")
        takes_labels = _row(self.head)[3]
        if takes_labels != (self.num_labels is not None):
            raise ValueError(f"head {self.head!r} {'needs' if takes_labels else 'takes no'} "
                             f"num_labels (got {self.num_labels!r})")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "ModelSpec":
        return cls(head=values["head"], num_labels=values.get("num_labels"))


def _row(head: str):
    return next(row for row in HEADS if row[0] == head)


def detect_model_spec(shapes: dict[str, tuple[int, ...]], source: str = "checkpoint"
                      ) -> ModelSpec:
    """Finds the head of a checkpoint from its original variable names and shapes.

    Args:
        shapes: {original name: shape}; optimizer state is ignored.
        source: what to call the checkpoint in errors.

    Raises:
        UnsupportedCheckpointError: unknown variables, a head with missing variables, or more
            than one head.
    """
    names = {name for name in shapes if not is_optimizer_state(name)}
    # The masked-LM's variables alone are the masked_lm head; with next-sentence ones, pretraining.
    head_of = {tf1: head for head in (*HEAD_NAMES, "masked_lm") for tf1 in HEAD_VARIABLES[head]}
    unknown = sorted(n for n in names if n not in head_of and not _ENCODER_NAME.match(n))
    if unknown:
        raise UnsupportedCheckpointError(
            f"{source}: {len(unknown)} variables belong to no head this project has: "
            + ", ".join(unknown))
    found = sorted({head_of[n] for n in names if n in head_of})
    if found == ["masked_lm", "pretraining"]:
        found = ["pretraining"]
    if len(found) > 1:
        raise UnsupportedCheckpointError(f"{source}: holds more than one head: {', '.join(found)}")
    if not found:
        return ModelSpec(ENCODER)
    head = found[0]
    missing = sorted(set(HEAD_VARIABLES[head]) - names)
    if missing:
        raise UnsupportedCheckpointError(
            f"{source}: the {head} head is incomplete; missing {', '.join(missing)}")
    if not _row(head)[3]:
        return ModelSpec(head)
    return ModelSpec(head, num_labels=int(shapes[HEAD_VARIABLES[head][0]][0]))


def build_model(config: BertConfig, spec: ModelSpec) -> keras.Model:
    """A freshly initialised model of the spec's class; every variable exists on return."""
    _, _, model_class, takes_labels = _row(spec.head)
    if takes_labels:
        return model_class(config, num_labels=spec.num_labels)
    return model_class(config)


def model_spec(model: keras.Model) -> ModelSpec:
    """The spec of a built model (the inverse of `build_model`)."""
    for head, _, model_class, takes_labels in HEADS:
        if type(model) is model_class:
            return ModelSpec(head, model.num_labels if takes_labels else None)
    raise ValueError(f"{type(model).__name__} is not one of this project's BERT models")


@dataclasses.dataclass
class ReadCheckpoint:
    """A checkpoint of another framework's format read into this project's terms."""

    config: BertConfig
    spec: ModelSpec
    # {original TF1 name: float32 array}.
    values: dict[str, Any]
    # The tokenizer's casing where the format records it; else None.
    do_lower_case: bool | None
    # A fine-tuned head's label names by id, where the format records them; else None.
    labels: tuple[str, ...] | None = None


class SavedSpec(NamedTuple):
    """What `model_spec.json` holds: the spec, and what is known of the tokenizer and labels."""

    spec: ModelSpec
    do_lower_case: bool | None
    # The classifier's or tagger's label names, by label id.
    labels: tuple[str, ...] | None
    # A classifier's problem type where it was saved ("multi_label": a sigmoid per label).
    problem_type: str | None = None


def write_model_spec(folder: str, spec: ModelSpec, do_lower_case: bool | None = None,
                     labels: Sequence[str] | None = None,
                     problem_type: str | None = None) -> str:
    """Writes `model_spec.json` in `folder` atomically; returns its path.

    Args:
        folder: the checkpoint's folder.
        spec: the model's head and label count.
        do_lower_case: the tokenizer's casing; the key is written only when it is known.
        labels: the label names by id (one per label of the head), written when given.
        problem_type: a classifier's (single_label, multi_label, regression), written when
            given.
    """
    values = spec.to_dict()
    if do_lower_case is not None:
        values["do_lower_case"] = do_lower_case
    if labels is not None:
        if len(labels) != spec.num_labels:
            raise ValueError(f"{len(labels)} label names for a head of {spec.num_labels} labels")
        values["labels"] = list(labels)
    if problem_type is not None:
        values["problem_type"] = problem_type
    path = os.path.join(folder, SPEC_FILE)
    write_text_atomically(path, json.dumps(values, indent=2, sort_keys=True) + "\n")
    return path


def read_model_spec(folder: str) -> SavedSpec | None:
    """The folder's `model_spec.json`; None where it has none."""
    path = os.path.join(folder, SPEC_FILE)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        values = json.load(f)
    labels = values.get("labels")
    return SavedSpec(ModelSpec.from_dict(values), values.get("do_lower_case"),
                     None if labels is None else tuple(labels), values.get("problem_type"))
