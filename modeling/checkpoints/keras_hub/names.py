"""The name table between the original TF1 checkpoint names and KerasHub's BERT presets.

Data, not code. A KerasHub preset keeps its weights as Keras's `save_weights` writes them: an HDF5
file whose groups follow the model's layers, `layers/<layer>/vars/<index>`, each `vars` group
carrying its layer's name as the attribute `name`. Each row pairs an original variable name with
the group that holds it in `model.weights.h5` (the `BertBackbone`) or `task.weights.h5` (a task's
own layers), the variable's index in that group, and how the array is reshaped on the way:
KerasHub's attention kernels are per head ([H, N, H/N]), as Model Garden's, so the reshapes are
those of `modeling.checkpoints.model_garden.names`. In a template `{i}` stands for the Transformer
layer index and `{_i}` for the suffix Keras gives the i-th layer of a class ("", "_1", "_2", ...).

The group tables list every group that Keras writes for KerasHub 0.32's models, the layers without
variables included, with the layer names as a fresh process names them: a preset written here is
the file KerasHub writes.
"""
from __future__ import annotations

import numpy as np

from modeling.checkpoints.model_garden.names import (HEADS_BIAS, HEADS_IN, HEADS_OUT, SAME,
                                                     TRANSPOSE)
from modeling.checkpoints.names import ENCODER_TABLE, HEAD_TABLE

_LAYER = "layers/transformer_encoder{_i}"
_ATTENTION = _LAYER + "/_self_attention_layer"
_ORIGINAL_LAYER = "bert/encoder/layer_{i}"

# (original name, group in model.weights.h5, index in its vars, reshape).
KERAS_HUB_ENCODER_TABLE = (
    ("bert/embeddings/word_embeddings", "layers/reversible_embedding", 0, SAME),
    ("bert/embeddings/position_embeddings", "layers/position_embedding", 0, SAME),
    ("bert/embeddings/token_type_embeddings", "layers/embedding", 0, SAME),
    ("bert/embeddings/LayerNorm/gamma", "layers/layer_normalization", 0, SAME),
    ("bert/embeddings/LayerNorm/beta", "layers/layer_normalization", 1, SAME),
    *((f"{_ORIGINAL_LAYER}/attention/self/{part}/{kind}", f"{_ATTENTION}/{part}_dense", index,
       HEADS_IN if kind == "kernel" else HEADS_BIAS)
      for part in ("query", "key", "value") for index, kind in enumerate(("kernel", "bias"))),
    (f"{_ORIGINAL_LAYER}/attention/output/dense/kernel", f"{_ATTENTION}/output_dense", 0,
     HEADS_OUT),
    (f"{_ORIGINAL_LAYER}/attention/output/dense/bias", f"{_ATTENTION}/output_dense", 1, SAME),
    (f"{_ORIGINAL_LAYER}/attention/output/LayerNorm/gamma", f"{_LAYER}/_self_attention_layer_norm",
     0, SAME),
    (f"{_ORIGINAL_LAYER}/attention/output/LayerNorm/beta", f"{_LAYER}/_self_attention_layer_norm",
     1, SAME),
    (f"{_ORIGINAL_LAYER}/intermediate/dense/kernel", f"{_LAYER}/_feedforward_intermediate_dense",
     0, SAME),
    (f"{_ORIGINAL_LAYER}/intermediate/dense/bias", f"{_LAYER}/_feedforward_intermediate_dense", 1,
     SAME),
    (f"{_ORIGINAL_LAYER}/output/dense/kernel", f"{_LAYER}/_feedforward_output_dense", 0, SAME),
    (f"{_ORIGINAL_LAYER}/output/dense/bias", f"{_LAYER}/_feedforward_output_dense", 1, SAME),
    (f"{_ORIGINAL_LAYER}/output/LayerNorm/gamma", f"{_LAYER}/_feedforward_layer_norm", 0, SAME),
    (f"{_ORIGINAL_LAYER}/output/LayerNorm/beta", f"{_LAYER}/_feedforward_layer_norm", 1, SAME),
    ("bert/pooler/dense/kernel", "layers/dense", 0, SAME),
    ("bert/pooler/dense/bias", "layers/dense", 1, SAME),
)
# BertTextClassifier's `logits` layer (task.weights.h5) reads the pooled output, as the original
# classifier does: its kernel is the original's output_weights transposed.
KERAS_HUB_CLASSIFIER_TABLE = (
    ("output_weights", "layers/dense", 0, TRANSPOSE),
    ("output_bias", "layers/dense", 1, SAME),
)

# (group, its layer's name) of every group Keras writes for BertBackbone, in model.weights.h5.
BACKBONE_GROUPS = (
    ("", "bert_backbone"),
    ("layers/input_layer", "token_ids"),
    ("layers/input_layer_1", "segment_ids"),
    ("layers/input_layer_2", "padding_mask"),
    ("layers/reversible_embedding", "token_embedding"),
    ("layers/position_embedding", "position_embedding"),
    ("layers/embedding", "segment_embedding"),
    ("layers/add", "embeddings_add"),
    ("layers/layer_normalization", "embeddings_layer_norm"),
    ("layers/dropout", "embeddings_dropout"),
    (_LAYER, "transformer_layer_{i}"),
    (_ATTENTION, "self_attention_layer"),
    (f"{_ATTENTION}/query_dense", "query"),
    (f"{_ATTENTION}/key_dense", "key"),
    (f"{_ATTENTION}/value_dense", "value"),
    (f"{_ATTENTION}/output_dense", "attention_output"),
    (f"{_ATTENTION}/_softmax", "softmax{_i}"),  # named by Keras, as in a fresh process
    (f"{_ATTENTION}/_dropout_layer", "dropout{_i}"),
    (f"{_LAYER}/_self_attention_layer_norm", "self_attention_layer_norm"),
    (f"{_LAYER}/_self_attention_dropout", "self_attention_dropout"),
    (f"{_LAYER}/_feedforward_intermediate_dense", "feedforward_intermediate_dense"),
    (f"{_LAYER}/_feedforward_output_dense", "feedforward_output_dense"),
    (f"{_LAYER}/_feedforward_layer_norm", "feedforward_layer_norm"),
    (f"{_LAYER}/_feedforward_dropout", "feedforward_dropout"),
    ("layers/dense", "pooled_dense"),
)
# The same for BertTextClassifier's own layers, in task.weights.h5. A KerasHub task is compiled
# when built, so the file holds its optimizer's variables too.
CLASSIFIER_GROUPS = (
    ("", "bert_text_classifier"),
    ("layers/dense", "logits"),
    ("layers/dropout", "classifier_dropout"),
    ("optimizer", "adam"),
    ("preprocessor", "bert_text_classifier_preprocessor"),
    ("preprocessor/tokenizer", "bert_tokenizer"),
)
# The optimizer a KerasHub TextClassifier compiles with by default (Adam, learning rate 5e-5),
# before any step: its iteration count and learning rate.
CLASSIFIER_OPTIMIZER_VALUES = {"optimizer/vars/0": np.int64(0),
                               "optimizer/vars/1": np.float32(5e-5)}
# Groups of a task's weights file that hold no model weights.
OPTIMIZER_GROUP = "optimizer"
# BertMaskedLM's head in task.weights.h5: recognised, never carried (`preset` says why).
MASKED_LM_HEAD_GROUP = "layers/masked_lm_head"


def layer_template(template: str, i: int) -> str:
    """`template` for the i-th Transformer layer: `{i}` -> i, `{_i}` -> Keras's suffix."""
    return template.replace("{i}", str(i)).replace("{_i}", f"_{i}" if i else "")


def dataset_path(group: str, index: int) -> str:
    """The HDF5 path of a layer's index-th variable."""
    return f"{group}/vars/{index}" if group else f"vars/{index}"


def _expand(rows, num_layers: int):
    for row in rows:
        per_layer = any("{" in str(part) for part in row)
        for i in range(num_layers) if per_layer else (0,):
            yield tuple(layer_template(part, i) if isinstance(part, str) else part
                        for part in row)


def encoder_rows(num_layers: int) -> list[tuple[str, str, str]]:
    """(original name, dataset path in model.weights.h5, reshape) of every encoder variable."""
    return [(tf1, dataset_path(group, index), reshape) for tf1, group, index, reshape
            in _expand(KERAS_HUB_ENCODER_TABLE, num_layers)]


def classifier_rows() -> list[tuple[str, str, str]]:
    """(original name, dataset path in task.weights.h5, reshape) of the classifier's variables."""
    return [(tf1, dataset_path(group, index), reshape)
            for tf1, group, index, reshape in KERAS_HUB_CLASSIFIER_TABLE]


def backbone_groups(num_layers: int) -> dict[str, str]:
    """{group: layer name} of every group of a BertBackbone's model.weights.h5."""
    return dict(_expand(BACKBONE_GROUPS, num_layers))


def _check_tables() -> None:
    """Every original encoder name has one row, every row's group a name, no dataset two rows."""
    encoder = [row[0] for row in KERAS_HUB_ENCODER_TABLE]
    if sorted(encoder) != sorted(row[0] for row in ENCODER_TABLE):
        raise AssertionError("the KerasHub encoder table does not cover the original encoder once")
    heads = {row[0] for row in HEAD_TABLE}
    if any(row[0] not in heads for row in KERAS_HUB_CLASSIFIER_TABLE):
        raise AssertionError("a KerasHub classifier row is not an original head name")
    groups = {group for group, _ in BACKBONE_GROUPS}
    if any(group not in groups for _, group, _, _ in KERAS_HUB_ENCODER_TABLE):
        raise AssertionError("a KerasHub encoder row names a group the layout lacks")
    datasets = [(group, index) for _, group, index, _ in KERAS_HUB_ENCODER_TABLE]
    if len(set(datasets)) != len(datasets):
        raise AssertionError("two KerasHub encoder rows on one variable")


_check_tables()
