"""The name table between the original TF1 checkpoint names and Model Garden's BERT.

Data, not code: each row pairs an original variable name with its object path in a Model Garden
checkpoint (below the encoder or head root), its variable name in a TF-Hub SavedModel exported by
Model Garden, and how the array is reshaped on the way. Attention kernels are per head in Model
Garden ([H, N, H/N]) and flat ([H, H]) in the original; the next-sentence kernel is transposed.
Both readers, `model_garden.checkpoint` (checkpoints) and `tf_hub.saved_model` (SavedModels),
read through it.
"""
from __future__ import annotations

import numpy as np

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
