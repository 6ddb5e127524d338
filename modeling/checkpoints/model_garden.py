"""Google's TF2-era BERT releases: Model Garden checkpoints and TF-Hub encoder SavedModels.

- `model_garden`: an object-based checkpoint of Model Garden's (`tensorflow/models`,
  `official/nlp`) `BertEncoder`, as `tf.train.Checkpoint(encoder=...)` (or the legacy `model=`)
  writes it, or of a `BertPretrainerV2` as training writes it (`model/encoder_network`,
  `model/masked_lm`, `model/classification_heads/0` = the next-sentence head). Its config is the
  `params.yaml` beside it (`modeling.checkpoints.model_garden_config`) or a `bert_config.json`.
- `tf_hub`: a TF-Hub / Kaggle BERT encoder SavedModel (`bert_en_uncased_L-12_H-768_A-12`, the
  small BERTs): variables by their Keras names, config from its `keras_metadata.pb`.

Both map onto the original TF1 names (`modeling.checkpoints.names`) and go through the same strict
assignment: every variable mapped exactly once, shapes checked, what is missing or left over
named. Attention kernels are per head in Model Garden ([H, N, H/N]) and flat ([H, H]) in the
original; the next-sentence head has its own pooler, which is written as a copy of the encoder's
(the original has one pooler), and a next-sentence head read with a pooler of its own is left out
(the encoder and its masked-LM head are read).
"""
from __future__ import annotations

import json
import os

from absl import logging
import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2
import yaml

from modeling.checkpoints.errors import CheckpointMismatchError, UnsupportedCheckpointError
from modeling.checkpoints.model_garden_config import (KERAS_ACTIVATIONS, PARAMS_FILE,
                                                      bert_config_from_keras,
                                                      bert_config_from_params,
                                                      check_masked_lm_activation,
                                                      params_from_bert_config, read_params)
from modeling.checkpoints.names import tf1_name_map
from modeling.checkpoints.tf1 import assign_tf1_values
from modeling.config import BertConfig

OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
SAVED_MODEL_FILE = "saved_model.pb"
KERAS_METADATA_FILE = "keras_metadata.pb"
_VALUE = "/.ATTRIBUTES/VARIABLE_VALUE"
# Where a Model Garden checkpoint keeps the encoder, first match wins.
ENCODER_ROOTS = ("model/encoder_network/", "encoder/", "model/")
MASKED_LM_ROOTS = ("model/masked_lm/", "masked_lm/")
NEXT_SENTENCE_ROOT = "model/classification_heads/0/"
_NOT_WEIGHTS = ("save_counter", "global_step", "optimizer/", OBJECT_GRAPH_KEY)
# Reshapes between the original's flat kernels and Model Garden's per-head ones.
SAME, HEADS_IN, HEADS_BIAS, HEADS_OUT, TRANSPOSE = "same", "in", "bias", "out", "transpose"

# (original name, checkpoint path below the encoder root, SavedModel variable name, reshape).
EMBEDDING_ROWS = (
    ("bert/embeddings/word_embeddings", "layer_with_weights-0/embeddings",
     "word_embeddings/embeddings", SAME),
    ("bert/embeddings/position_embeddings", "layer_with_weights-1/embeddings",
     "position_embedding/embeddings", SAME),
    ("bert/embeddings/token_type_embeddings", "layer_with_weights-2/embeddings",
     "type_embeddings/embeddings", SAME),
    ("bert/embeddings/LayerNorm/gamma", "layer_with_weights-3/gamma",
     "embeddings/layer_norm/gamma", SAME),
    ("bert/embeddings/LayerNorm/beta", "layer_with_weights-3/beta",
     "embeddings/layer_norm/beta", SAME),
)
# Below `bert/encoder/layer_{i}/`, `layer_with_weights-{4 + i}/`, `transformer/layer_{i}/`.
LAYER_ROWS = tuple(
    (f"attention/self/{part}/{kind}", f"_attention_layer/_{part}_dense/{kind}",
     f"self_attention/{part}/{kind}", HEADS_IN if kind == "kernel" else HEADS_BIAS)
    for part in ("query", "key", "value") for kind in ("kernel", "bias")) + (
    ("attention/output/dense/kernel", "_attention_layer/_output_dense/kernel",
     "self_attention/attention_output/kernel", HEADS_OUT),
    ("attention/output/dense/bias", "_attention_layer/_output_dense/bias",
     "self_attention/attention_output/bias", SAME),
    ("attention/output/LayerNorm/gamma", "_attention_layer_norm/gamma",
     "self_attention_layer_norm/gamma", SAME),
    ("attention/output/LayerNorm/beta", "_attention_layer_norm/beta",
     "self_attention_layer_norm/beta", SAME),
    ("intermediate/dense/kernel", "_intermediate_dense/kernel", "intermediate/kernel", SAME),
    ("intermediate/dense/bias", "_intermediate_dense/bias", "intermediate/bias", SAME),
    ("output/dense/kernel", "_output_dense/kernel", "output/kernel", SAME),
    ("output/dense/bias", "_output_dense/bias", "output/bias", SAME),
    ("output/LayerNorm/gamma", "_output_layer_norm/gamma", "output_layer_norm/gamma", SAME),
    ("output/LayerNorm/beta", "_output_layer_norm/beta", "output_layer_norm/beta", SAME),
)
# Below `layer_with_weights-{4 + num_layers}/` (checkpoint), `pooler_transform/` (SavedModel).
POOLER_ROWS = (("bert/pooler/dense/kernel", "kernel", SAME),
               ("bert/pooler/dense/bias", "bias", SAME))
# Below the masked-LM root; its `embedding_table` is the word embeddings (checked, not mapped).
MASKED_LM_ROWS = (("cls/predictions/transform/dense/kernel", "dense/kernel", SAME),
                  ("cls/predictions/transform/dense/bias", "dense/bias", SAME),
                  ("cls/predictions/transform/LayerNorm/gamma", "layer_norm/gamma", SAME),
                  ("cls/predictions/transform/LayerNorm/beta", "layer_norm/beta", SAME),
                  ("cls/predictions/output_bias", "bias", SAME))
# A TF-Hub SavedModel's masked-LM variables (Model Garden's MaskedLM layer, `cls/predictions`,
# below the pretrainer's name scope) by original name: the same names, but for the output bias.
HUB_MASKED_LM_NAMES = {tf1: tf1 for tf1, _, _ in MASKED_LM_ROWS} | {
    "cls/predictions/output_bias": "cls/predictions/output_bias/bias"}
NEXT_SENTENCE_ROWS = (("cls/seq_relationship/output_weights", "out_proj/kernel", TRANSPOSE),
                      ("cls/seq_relationship/output_bias", "out_proj/bias", SAME))


def to_original(value: np.ndarray, reshape: str) -> np.ndarray:
    """A Model Garden array in the original's layout."""
    if reshape == HEADS_IN:  # [H, N, H/N] -> [H, H]
        return value.reshape(value.shape[0], -1)
    if reshape == HEADS_BIAS:  # [N, H/N] -> [H]
        return value.reshape(-1)
    if reshape == HEADS_OUT:  # [N, H/N, H] -> [H, H]
        return value.reshape(-1, value.shape[-1])
    return value.T if reshape == TRANSPOSE else value


def to_model_garden(value: np.ndarray, reshape: str, num_heads: int) -> np.ndarray:
    """An original array in Model Garden's layout (the inverse of `to_original`)."""
    if reshape == HEADS_IN:
        return value.reshape(value.shape[0], num_heads, -1)
    if reshape == HEADS_BIAS:
        return value.reshape(num_heads, -1)
    if reshape == HEADS_OUT:
        return value.reshape(num_heads, -1, value.shape[-1])
    return value.T if reshape == TRANSPOSE else value


def encoder_rows(num_layers: int) -> list[tuple[str, str, str, str]]:
    """(original name, checkpoint path, SavedModel name, reshape) of every encoder variable."""
    rows = list(EMBEDDING_ROWS)
    for i in range(num_layers):
        rows += [(f"bert/encoder/layer_{i}/{tf1}", f"layer_with_weights-{4 + i}/{path}",
                  f"transformer/layer_{i}/{name}", reshape)
                 for tf1, path, name, reshape in LAYER_ROWS]
    rows += [(tf1, f"layer_with_weights-{4 + num_layers}/{path}", f"pooler_transform/{path}",
              reshape) for tf1, path, reshape in POOLER_ROWS]
    return rows


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


def is_tf_hub_folder(path: str) -> bool:
    """True for a SavedModel folder (a TF-Hub encoder is one)."""
    return os.path.isdir(path) and os.path.isfile(os.path.join(path, SAVED_MODEL_FILE))


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
    rows = [(tf1, encoder_root + path, reshape) for tf1, path, _, reshape in encoder_rows(num_layers)]
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


def read_tf_hub_values(folder: str, config: BertConfig | None = None
                       ) -> tuple[BertConfig, dict[str, np.ndarray], bool | None]:
    """(config, {original name: array}, do_lower_case) of a TF-Hub BERT encoder SavedModel, with
    its masked-LM head where it was exported with one (`export_tfhub_lib` `with_mlm`: an `mlm`
    object over the same encoder).

    Args:
        folder: the SavedModel.
        config: the model's config, used where the SavedModel has no `keras_metadata.pb` (older
            releases); the one in `keras_metadata.pb` comes first.

    Raises:
        UnsupportedCheckpointError: its config is missing or not representable, or variables
            are left over or missing (named).
    """
    if os.path.isfile(os.path.join(folder, KERAS_METADATA_FILE)) or config is None:
        config = bert_config_from_keras(_saved_encoder_config(folder), folder)
    loaded = tf.saved_model.load(folder)
    variables = {v.name.split(":")[0]: v for v in loaded.variables}
    do_lower_case = variables.pop("Variable", None)
    if hasattr(loaded, "do_lower_case"):
        do_lower_case = loaded.do_lower_case
    values, missing = {}, []
    for tf1, _, name, reshape in encoder_rows(config.num_hidden_layers):
        if name in variables:
            values[tf1] = to_original(variables.pop(name).numpy(), reshape)
        else:
            missing.append(name)
    encoder = {id(v) for v in loaded.variables}
    # The masked-LM's own variables; its table is the encoder's word embeddings.
    head = {v.name.split(":")[0]: v for v in getattr(getattr(loaded, "mlm", None), "variables", ())
            if id(v) not in encoder}
    if head:
        for tf1, saved in HUB_MASKED_LM_NAMES.items():
            name = next((n for n in head if n == saved or n.endswith("/" + saved)), None)
            if name is None:
                missing.append(f"mlm {tf1}")
            else:
                values[tf1] = head.pop(name).numpy()
        variables.update({f"mlm {name}": v for name, v in head.items()})
    if missing or variables:
        raise UnsupportedCheckpointError(
            f"{folder}: not a BERT encoder of its config: missing {', '.join(missing) or '-'}; "
            f"left over {', '.join(sorted(variables)) or '-'}")
    return config, values, None if do_lower_case is None else bool(do_lower_case.numpy())


def _saved_encoder_config(folder: str) -> dict:
    """The Keras config of the `BertEncoder` in a SavedModel's `keras_metadata.pb`, after checking
    every LayerNorm epsilon and block of the model against what this project computes."""
    path = os.path.join(folder, KERAS_METADATA_FILE)
    if not os.path.isfile(path):
        raise UnsupportedCheckpointError(
            f"{folder}: no {KERAS_METADATA_FILE}, so its config cannot be read; pass "
            "--bert_config_file (the release's bert_config.json)")
    with open(path, "rb") as f:
        metadata = [json.loads(m) for m in _metadata_strings(f.read())]
    encoders = [m["config"] for m in metadata if m.get("class_name") in
                ("BertEncoder", "Text>BertEncoder") and "vocab_size" in m.get("config", {})]
    if not encoders:
        raise UnsupportedCheckpointError(f"{path}: holds no Model Garden BertEncoder")
    for m in metadata:
        config = m.get("config") or {}
        epsilon = config.get("epsilon", config.get("norm_epsilon"))
        if m.get("class_name") in ("LayerNormalization", "Text>TransformerEncoderBlock") \
                and epsilon is not None and epsilon != 1e-12:
            raise UnsupportedCheckpointError(
                f"{path}: {config.get('name')} has LayerNorm epsilon {epsilon}; this project "
                "computes 1e-12")
        if m.get("class_name") == "Text>TransformerEncoderBlock" and config.get("norm_first"):
            raise UnsupportedCheckpointError(f"{path}: {config.get('name')} is pre-LayerNorm")
        if m.get("class_name") == "Text>TransformerEncoderBlock" and config.get(
                "inner_activation") not in (None, *KERAS_ACTIVATIONS):
            raise UnsupportedCheckpointError(
                f"{path}: activation {config.get('inner_activation')!r} is not supported")
    return encoders[0]


def _metadata_strings(data: bytes) -> list[str]:
    """The `metadata` strings (field 5) of every node (field 1) of a `SavedMetadata` proto."""
    def fields(buffer):
        position = 0
        while position < len(buffer):
            key, position = _varint(buffer, position)
            number, wire = key >> 3, key & 7
            if wire == 0:
                value, position = _varint(buffer, position)
            elif wire == 2:
                length, position = _varint(buffer, position)
                value, position = buffer[position:position + length], position + length
            else:
                raise UnsupportedCheckpointError(f"unexpected wire type {wire} in keras_metadata")
            yield number, value

    return [value.decode("utf-8") for number, node in fields(data) if number == 1
            for field, value in fields(node) if field == 5]


def _varint(buffer: bytes, position: int) -> tuple[int, int]:
    result, shift = 0, 0
    while True:
        byte = buffer[position]
        result |= (byte & 0x7F) << shift
        position, shift = position + 1, shift + 7
        if not byte & 0x80:
            return result, position


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
    _check_activation(config, model, prefix)
    values = read_model_garden_values(prefix, model.config.num_hidden_layers, reader)
    return assign_tf1_values(model, values, f"checkpoint {prefix}")


def load_tf_hub_checkpoint(model, folder: str) -> list[str]:
    """Assigns a TF-Hub BERT encoder SavedModel to a built model, all or nothing."""
    config, values, _ = read_tf_hub_values(folder, model.config)
    _check_activation(config, model, folder)
    return assign_tf1_values(model, values, folder)


def _check_activation(config: BertConfig | None, model, source: str) -> None:
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
