"""Model Garden's TF2-era BERT checkpoints: object-based checkpoints of its `BertEncoder` and
`BertPretrainerV2`.

An object-based checkpoint of Model Garden's (`tensorflow/models`, `official/nlp`) `BertEncoder`,
as `tf.train.Checkpoint(encoder=...)` (or the legacy `model=`) writes it, or of a
`BertPretrainerV2` as training writes it (`model/encoder_network`, `model/masked_lm`,
`model/classification_heads/0` = the next-sentence head). Its config is the `params.yaml` beside
it (`modeling.checkpoints.model_garden.config`) or a `bert_config.json`. (TF-Hub SavedModels
exported from Model Garden are read by `modeling.checkpoints.tf_hub.saved_model`.)

It maps onto the original TF1 names (`modeling.checkpoints.names`, through the rows of
`modeling.checkpoints.model_garden.names`) and goes through the strict assignment: every variable
mapped exactly once, shapes checked, what is missing or left over named. The next-sentence head
has its own pooler, which is written as a copy of the encoder's (the original has one pooler), and
a next-sentence head read with a pooler of its own is left out (the encoder and its masked-LM head
are read).
"""
from __future__ import annotations

import os

from absl import logging
import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2
import yaml

from modeling.checkpoints.errors import CheckpointMismatchError, UnsupportedCheckpointError
from modeling.checkpoints.model_garden.config import (PARAMS_FILE, bert_config_from_params,
                                                      check_masked_lm_activation,
                                                      params_from_bert_config, read_params)
from modeling.checkpoints.model_garden.names import (MASKED_LM_ROWS, NEXT_SENTENCE_ROWS,
                                                     POOLER_ROWS, encoder_rows, to_model_garden,
                                                     to_original)
from modeling.checkpoints.names import tf1_name_map
from modeling.checkpoints.tf1.checkpoint import assign_tf1_values
from modeling.config import BertConfig

OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
_VALUE = "/.ATTRIBUTES/VARIABLE_VALUE"
# Where a Model Garden checkpoint keeps the encoder, first match wins.
ENCODER_ROOTS = ("model/encoder_network/", "encoder/", "model/")
MASKED_LM_ROOTS = ("model/masked_lm/", "masked_lm/")
NEXT_SENTENCE_ROOT = "model/classification_heads/0/"
_NOT_WEIGHTS = ("save_counter", "global_step", "optimizer/", OBJECT_GRAPH_KEY)


def object_paths(reader: tf.train.CheckpointReader) -> dict[str, str]:
    """{object path: checkpoint key} of every variable, over every path that reaches it (a
    variable shared by two layers, such as the tied word embeddings, is saved once). A variable
    the object graph lists but the checkpoint lacks (deleted from it) is left out, so that the
    strict assignment names it as missing."""
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor(OBJECT_GRAPH_KEY))
    paths: dict[str, str] = {}

    def visit(node_id: int, path: str, seen: frozenset) -> None:
        node = graph.nodes[node_id]
        for attribute in node.attributes:
            if attribute.name == "VARIABLE_VALUE" and reader.has_tensor(attribute.checkpoint_key):
                paths[path] = attribute.checkpoint_key
        for child in node.children:
            if child.node_id not in seen and len(seen) < 8:
                visit(child.node_id, f"{path}/{child.local_name}" if path else child.local_name,
                      seen | {child.node_id})

    visit(0, "", frozenset({0}))
    return paths


def is_model_garden_checkpoint(reader: tf.train.CheckpointReader) -> bool:
    """True for an (open) object-based checkpoint holding a Model Garden `BertEncoder`."""
    return any(reader.has_tensor(f"{root}layer_with_weights-3/gamma{_VALUE}")
               for root in ENCODER_ROOTS)



def _root(paths: dict[str, str], roots: tuple[str, ...], leaf: str) -> str | None:
    return next((root for root in roots if root + leaf in paths), None)


def read_model_garden_values(prefix: str, num_layers: int,
                             reader: tf.train.CheckpointReader | None = None
                             ) -> dict[str, np.ndarray]:
    """{original name: array} of a Model Garden checkpoint: the encoder, and the masked-LM and
    next-sentence heads where it has them. `reader` is the checkpoint already open, if it is.

    A next-sentence head whose pooler is not a copy of the encoder's (Model Garden's own training
    updates the two apart) is left out, with a warning: this project's BERT has one pooler.

    Raises:
        UnsupportedCheckpointError: variables with no place in this project's models (named), a
            masked-LM table that is not the word embeddings, or a masked-LM activation other than
            the encoder's.
    """
    reader = reader or tf.train.load_checkpoint(prefix)
    paths = object_paths(reader)
    encoder_root = _root(paths, ENCODER_ROOTS, "layer_with_weights-3/gamma")
    if encoder_root is None:
        raise UnsupportedCheckpointError(f"{prefix}: no Model Garden BertEncoder found")
    used: set[str] = set()

    def take(path):
        used.add(paths[path])
        return reader.get_tensor(paths[path])

    values = {}
    rows = [(tf1, encoder_root + path, reshape)
            for tf1, path, _, reshape in encoder_rows(num_layers)]
    mlm_root = _root(paths, MASKED_LM_ROOTS, "dense/kernel")
    params = read_params(os.path.dirname(prefix)) if mlm_root else None
    if params is not None:
        check_masked_lm_activation(params, prefix)
    if mlm_root:
        rows += [(tf1, mlm_root + path, reshape) for tf1, path, reshape in MASKED_LM_ROWS]
    if NEXT_SENTENCE_ROOT + "out_proj/kernel" in paths:
        rows += [(tf1, NEXT_SENTENCE_ROOT + path, reshape) for tf1, path, reshape in
                 NEXT_SENTENCE_ROWS]
    for tf1, path, reshape in rows:
        if path in paths:
            values[tf1] = to_original(take(path), reshape)
    if mlm_root and mlm_root + "embedding_table" in paths:
        _check_copy(take(mlm_root + "embedding_table"), values.get(rows[0][0]),
                    f"{prefix}: {mlm_root}embedding_table", "the word embeddings")
    own_pooler = [pooler + path for pooler in (NEXT_SENTENCE_ROOT + "dense/",
                                               "next_sentence.pooler_dense/")
                  for tf1, path, _ in POOLER_ROWS if pooler + path in paths
                  and not np.array_equal(take(pooler + path), values.get(tf1))]
    if own_pooler:
        logging.warning(
            "%s: the next-sentence head has its own pooler (%s), which this project's BERT does "
            "not carry (it has one pooler, as the original): read without the next-sentence "
            "head", prefix, ", ".join(own_pooler))
        for tf1, _, _ in NEXT_SENTENCE_ROWS:
            values.pop(tf1, None)
    left = sorted(path for path, key in paths.items() if key not in used
                  and not path.startswith(_NOT_WEIGHTS))
    if left:
        raise UnsupportedCheckpointError(
            f"{prefix}: {len(left)} variables have no place in this project's models: "
            + ", ".join(left))
    return values


def _check_copy(value: np.ndarray, original: np.ndarray | None, what: str, of: str) -> None:
    if original is None or value.shape != original.shape or not np.array_equal(value, original):
        raise UnsupportedCheckpointError(
            f"{what} is not a copy of {of}; this project's BERT has one (as the original)")


def read_model_garden_config(folder: str, source: str) -> BertConfig | None:
    """The config beside a Model Garden checkpoint: `params.yaml`, else None (the caller reads
    `bert_config.json`)."""
    params = read_params(folder)
    return bert_config_from_params(params, source) if params is not None else None


def load_model_garden_checkpoint(model, prefix: str,
                                 reader: tf.train.CheckpointReader | None = None) -> list[str]:
    """Assigns a Model Garden checkpoint to a built model, all or nothing; returns the original
    names it did not use (the heads, when `model` is an encoder). `reader` is the checkpoint
    already open, if it is.

    Raises:
        CheckpointMismatchError: the activation of its `params.yaml` differs from the model's, or
            a variable is missing or has another shape.
    """
    config = read_model_garden_config(os.path.dirname(prefix), prefix)
    check_activation(config, model, prefix)
    values = read_model_garden_values(prefix, model.config.num_hidden_layers, reader)
    return assign_tf1_values(model, values, f"checkpoint {prefix}")


def check_activation(config: BertConfig | None, model, source: str) -> None:
    """Raises CheckpointMismatchError where the checkpoint's config computes another activation
    than the model's."""
    if config is not None and config.hidden_act.lower() != model.config.hidden_act.lower():
        raise CheckpointMismatchError(
            f"{source} computes hidden_act={config.hidden_act!r}, the model "
            f"hidden_act={model.config.hidden_act!r}")


# Heads Model Garden's BERT models hold.
WRITABLE_HEADS = ("encoder", "pretraining", "masked_lm")


def check_model_garden_writable(spec) -> None:
    """Raises UnsupportedCheckpointError for a head other than those of `WRITABLE_HEADS`."""
    if spec.head not in WRITABLE_HEADS:
        raise UnsupportedCheckpointError(
            f"the {spec.head} head is not written in the Model Garden format; heads written: "
            f"{', '.join(WRITABLE_HEADS)}")


def _node(values: dict[str, tf.Variable]) -> tf.Module:
    """A trackable object whose children are `values` at their paths ("a/b/c")."""
    root = tf.Module()
    for path, variable in values.items():
        node = root
        *parents, leaf = path.split("/")
        for part in parents:
            if not hasattr(node, part):
                setattr(node, part, tf.Module())
            node = getattr(node, part)
        setattr(node, leaf, variable)
    return root


def write_model_garden_checkpoint(model, prefix: str) -> str:
    """Writes a model as Model Garden writes it, and `params.yaml` beside it.

    An encoder as `tf.train.Checkpoint(encoder=...)` writes Model Garden's `BertEncoder`; a
    masked-LM model as Google's converter writes a pretrainer (`encoder=`, `masked_lm=`); a
    pretraining model as training writes a `BertPretrainerV2` (`model=`, its next-sentence head's
    pooler a copy of the encoder's), with the same variables also under the names of the
    pretrainer's `checkpoint_items` (`encoder=`, `masked_lm=`, `next_sentence.pooler_dense=`),
    which a Model Garden task's `initialize` restores.
    """
    config = model.config
    names = {name: variable.numpy() for name, variable in tf1_name_map(model).items()}

    def variables(rows):
        return {path: tf.Variable(to_model_garden(names[tf1], reshape,
                                                  config.num_attention_heads))
                for tf1, path, reshape in rows}

    encoder = variables([(tf1, path, reshape) for tf1, path, _, reshape in
                         encoder_rows(config.num_hidden_layers)])
    with_masked_lm = "cls/predictions/output_bias" in names
    with_next_sentence = "cls/seq_relationship/output_bias" in names
    items = {"encoder": _node(encoder)}
    if with_masked_lm:
        masked_lm = variables(MASKED_LM_ROWS)
        masked_lm["embedding_table"] = encoder["layer_with_weights-0/embeddings"]
        items["masked_lm"] = _node(masked_lm)
    if with_next_sentence:
        pooler = f"layer_with_weights-{4 + config.num_hidden_layers}/"
        # A copy, not the same variable: Model Garden restores a saved variable into one object.
        head = _node({**variables(NEXT_SENTENCE_ROWS),
                      "dense/kernel": tf.Variable(encoder[pooler + "kernel"].numpy()),
                      "dense/bias": tf.Variable(encoder[pooler + "bias"].numpy())})
        pretrainer = _node({})
        pretrainer.encoder_network = items["encoder"]
        pretrainer.masked_lm = items["masked_lm"]
        pretrainer.classification_heads = [head]
        items.update({"model": pretrainer, "next_sentence.pooler_dense": head.dense})
    checkpoint = tf.train.Checkpoint(**items)
    checkpoint.save_counter  # Created, as `Checkpoint.save` does.
    written = checkpoint.write(prefix)
    with open(os.path.join(os.path.dirname(prefix), PARAMS_FILE), "w", encoding="utf-8") as f:
        yaml.safe_dump({"task": {"model": params_from_bert_config(
            config, with_masked_lm, with_next_sentence)}}, f, sort_keys=True)
    return written