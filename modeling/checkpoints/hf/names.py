"""The name table between the original TF1 checkpoint names and Hugging Face BERT state dicts.

Data, not code: each row pairs an original variable name with the Hugging Face parameter name and
says whether the array is transposed on the way (`torch.nn.Linear` stores its weight as [out, in],
the original's dense kernels are [in, out]; the original's `output_weights` heads are already
[out, in]). `{i}` stands for the Transformer layer index. The activation table maps the
`hidden_act` values of both sides formula for formula.
"""
import re

import numpy as np

from modeling.checkpoints.names import ENCODER_TABLE, HEAD_TABLE

# (original name, Hugging Face name without the `bert.` prefix of task models, transposed).
HF_ENCODER_TABLE = (
    ("bert/embeddings/word_embeddings", "embeddings.word_embeddings.weight", False),
    ("bert/embeddings/token_type_embeddings", "embeddings.token_type_embeddings.weight", False),
    ("bert/embeddings/position_embeddings", "embeddings.position_embeddings.weight", False),
    ("bert/embeddings/LayerNorm/gamma", "embeddings.LayerNorm.weight", False),
    ("bert/embeddings/LayerNorm/beta", "embeddings.LayerNorm.bias", False),
    ("bert/encoder/layer_{i}/attention/self/query/kernel",
     "encoder.layer.{i}.attention.self.query.weight", True),
    ("bert/encoder/layer_{i}/attention/self/query/bias",
     "encoder.layer.{i}.attention.self.query.bias", False),
    ("bert/encoder/layer_{i}/attention/self/key/kernel",
     "encoder.layer.{i}.attention.self.key.weight", True),
    ("bert/encoder/layer_{i}/attention/self/key/bias",
     "encoder.layer.{i}.attention.self.key.bias", False),
    ("bert/encoder/layer_{i}/attention/self/value/kernel",
     "encoder.layer.{i}.attention.self.value.weight", True),
    ("bert/encoder/layer_{i}/attention/self/value/bias",
     "encoder.layer.{i}.attention.self.value.bias", False),
    ("bert/encoder/layer_{i}/attention/output/dense/kernel",
     "encoder.layer.{i}.attention.output.dense.weight", True),
    ("bert/encoder/layer_{i}/attention/output/dense/bias",
     "encoder.layer.{i}.attention.output.dense.bias", False),
    ("bert/encoder/layer_{i}/attention/output/LayerNorm/gamma",
     "encoder.layer.{i}.attention.output.LayerNorm.weight", False),
    ("bert/encoder/layer_{i}/attention/output/LayerNorm/beta",
     "encoder.layer.{i}.attention.output.LayerNorm.bias", False),
    ("bert/encoder/layer_{i}/intermediate/dense/kernel",
     "encoder.layer.{i}.intermediate.dense.weight", True),
    ("bert/encoder/layer_{i}/intermediate/dense/bias",
     "encoder.layer.{i}.intermediate.dense.bias", False),
    ("bert/encoder/layer_{i}/output/dense/kernel", "encoder.layer.{i}.output.dense.weight", True),
    ("bert/encoder/layer_{i}/output/dense/bias", "encoder.layer.{i}.output.dense.bias", False),
    ("bert/encoder/layer_{i}/output/LayerNorm/gamma",
     "encoder.layer.{i}.output.LayerNorm.weight", False),
    ("bert/encoder/layer_{i}/output/LayerNorm/beta",
     "encoder.layer.{i}.output.LayerNorm.bias", False),
    ("bert/pooler/dense/kernel", "pooler.dense.weight", True),
    ("bert/pooler/dense/bias", "pooler.dense.bias", False),
)

# Heads, by the Hugging Face class that holds them. Token classification reuses the `classifier`
# names of sequence classification: the config's `architectures` tells them apart.
_MASKED_LM_ROWS = (
    ("cls/predictions/transform/dense/kernel", "cls.predictions.transform.dense.weight", True),
    ("cls/predictions/transform/dense/bias", "cls.predictions.transform.dense.bias", False),
    ("cls/predictions/transform/LayerNorm/gamma", "cls.predictions.transform.LayerNorm.weight",
     False),
    ("cls/predictions/transform/LayerNorm/beta", "cls.predictions.transform.LayerNorm.bias",
     False),
    ("cls/predictions/output_bias", "cls.predictions.bias", False),
)
HF_HEAD_TABLES = {
    "BertForPreTraining": _MASKED_LM_ROWS + (
        ("cls/seq_relationship/output_weights", "cls.seq_relationship.weight", False),
        ("cls/seq_relationship/output_bias", "cls.seq_relationship.bias", False),
    ),
    "BertForMaskedLM": _MASKED_LM_ROWS,
    "BertForSequenceClassification": (
        ("output_weights", "classifier.weight", False),
        ("output_bias", "classifier.bias", False),
    ),
    "BertForQuestionAnswering": (
        ("cls/squad/output_weights", "qa_outputs.weight", False),
        ("cls/squad/output_bias", "qa_outputs.bias", False),
    ),
    "BertForTokenClassification": (
        ("cls/token_classifier/output_weights", "classifier.weight", False),
        ("cls/token_classifier/output_bias", "classifier.bias", False),
    ),
}
ENCODER_ONLY = "BertModel"
BASE_PREFIX = "bert."

# Parameters a Hugging Face file may hold that are copies of others (weight tying): each must equal
# the parameter it is tied to, and is then dropped.
HF_TIED = (
    ("cls.predictions.decoder.weight", "bert.embeddings.word_embeddings.weight"),
    ("cls.predictions.decoder.bias", "cls.predictions.bias"),
)
# Buffers of older files (not weights): dropped.
HF_BUFFERS = re.compile(r"^(bert\.)?embeddings\.(position_ids|token_type_ids)$")
# Older files name LayerNorm parameters as TF did.
HF_LEGACY_SUFFIXES = (("LayerNorm.gamma", "LayerNorm.weight"), ("LayerNorm.beta", "LayerNorm.bias"))

# This project's `hidden_act` -> the Hugging Face name of the same formula.
ACTIVATIONS_TO_HF = {
    "gelu": "gelu_new",        # 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))), as the original
    "gelu_exact": "gelu",      # x * Phi(x) with erf
    "relu": "relu",
    "tanh": "tanh",
    "linear": "linear",
}
# Hugging Face `hidden_act` -> this project's; several Hugging Face names share a formula.
ACTIVATIONS_FROM_HF = {
    "gelu_new": "gelu",
    "gelu_pytorch_tanh": "gelu",
    "gelu_python_tanh": "gelu",
    "gelu": "gelu_exact",
    "gelu_python": "gelu_exact",
    "relu": "relu",
    "tanh": "tanh",
    "linear": "linear",
}


def _check_tables() -> None:
    """Every original name of the TF1 table has exactly one Hugging Face row, and vice versa."""
    known = {row[0] for row in ENCODER_TABLE + HEAD_TABLE}
    encoder = [row[0] for row in HF_ENCODER_TABLE]
    # (BertForMaskedLM's rows are BertForPreTraining's first ones.)
    heads = [row[0] for row in {row for rows in HF_HEAD_TABLES.values() for row in rows}]
    for name in encoder + heads:
        if name not in known:
            raise AssertionError(f"{name!r} is not a name of the original checkpoints")
    if len(set(encoder + heads)) != len(encoder + heads):
        raise AssertionError("an original name has two Hugging Face rows")
    if set(encoder) != {row[0] for row in ENCODER_TABLE}:
        raise AssertionError("the Hugging Face encoder table does not cover the original encoder")


_check_tables()


def _expand(rows, num_layers: int, prefix: str):
    """Rows with `{i}` replaced by every layer index, Hugging Face names prefixed."""
    for tf1, hf, transposed in rows:
        indexes = range(num_layers) if "{i}" in tf1 else (None,)
        for i in indexes:
            yield (tf1.replace("{i}", str(i)), prefix + hf.replace("{i}", str(i)), transposed)


def hf_rows(architecture: str, num_layers: int) -> list[tuple[str, str, bool]]:
    """(original name, Hugging Face name, transposed) for every parameter of a model class.

    Raises:
        ValueError: the class is not one this table covers.
    """
    if architecture == ENCODER_ONLY:
        return list(_expand(HF_ENCODER_TABLE, num_layers, ""))
    if architecture not in HF_HEAD_TABLES:
        raise ValueError(f"Hugging Face architecture {architecture!r} is not supported; supported: "
                         f"{', '.join((ENCODER_ONLY, *HF_HEAD_TABLES))}")
    return (list(_expand(HF_ENCODER_TABLE, num_layers, BASE_PREFIX))
            + list(_expand(HF_HEAD_TABLES[architecture], num_layers, "")))


def to_hf_arrays(values: dict[str, np.ndarray], architecture: str,
                 num_layers: int) -> dict[str, np.ndarray]:
    """Renames (and transposes) original-named arrays into a Hugging Face state dict.

    Raises:
        ValueError: a name of `values` has no row, or a row's name is absent from `values`.
    """
    rows = hf_rows(architecture, num_layers)
    missing = sorted(tf1 for tf1, _, _ in rows if tf1 not in values)
    unmapped = sorted(set(values) - {tf1 for tf1, _, _ in rows})
    if missing or unmapped:
        raise ValueError(f"{architecture}: variables missing {missing}, variables without a "
                         f"Hugging Face name {unmapped}")
    return {hf: np.ascontiguousarray(values[tf1].T if transposed else values[tf1])
            for tf1, hf, transposed in rows}


def from_hf_arrays(state: dict[str, np.ndarray], architecture: str,
                   num_layers: int) -> dict[str, np.ndarray]:
    """Renames (and transposes) a Hugging Face state dict into original-named arrays.

    `state` is named as `architecture` saves it (`bert.` prefix for task classes, none for
    `BertModel`), tied copies and buffers removed. Parameters absent from `state` are absent from
    the result: the caller decides what is required. Raises ValueError naming every parameter that
    has no row.
    """
    rows = hf_rows(architecture, num_layers)
    unknown = sorted(set(state) - {hf for _, hf, _ in rows})
    if unknown:
        raise ValueError(f"{architecture}: parameters with no place in this project's model "
                         f"({len(unknown)}): {', '.join(unknown)}")
    return {tf1: np.ascontiguousarray(state[hf].T if transposed else state[hf])
            for tf1, hf, transposed in rows if hf in state}
