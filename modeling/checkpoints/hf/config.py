"""Hugging Face `config.json` / `tokenizer_config.json` <-> this project's `BertConfig` and head.

The eleven `bert_config.json` keys keep their names in a Hugging Face BERT config; `hidden_act`
goes through the activation table of `modeling.checkpoints.hf.names` so that the formula, not the
word, survives. Settings this project does not compute (another `model_type`, a LayerNorm epsilon
other than the original's 1e-12, relative position embeddings, decoder use) are refused.
"""
from __future__ import annotations

from typing import Any

from modeling.checkpoints.errors import UnsupportedCheckpointError
from modeling.checkpoints.hf.names import ACTIVATIONS_FROM_HF, ACTIVATIONS_TO_HF, ENCODER_ONLY
from modeling.checkpoints.model_specs import ModelSpec
from modeling.config import RELEASE_EXTRA_KEYS, BertConfig

# The Hugging Face class written for each head this project can write there.
ARCHITECTURES = {
    "encoder": ENCODER_ONLY,
    "pretraining": "BertForPreTraining",
    "masked_lm": "BertForMaskedLM",
    "classifier": "BertForSequenceClassification",
    "squad": "BertForQuestionAnswering",
    "token_classifier": "BertForTokenClassification",
}
LAYER_NORM_EPSILON = 1e-12
# Defaults of transformers' BertConfig, for keys a config.json leaves out.
HF_DEFAULTS = {
    "vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
    "intermediate_size": 3072, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 512, "type_vocab_size": 2,
    "initializer_range": 0.02,
}
# (key, value this project computes); a config with another value is refused.
_REQUIRED_SETTINGS = (
    ("layer_norm_eps", LAYER_NORM_EPSILON),
    ("position_embedding_type", "absolute"),
    ("is_decoder", False),
    ("add_cross_attention", False),
)
_SPECIAL_TOKENS = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
                   "cls_token": "[CLS]", "mask_token": "[MASK]"}


def bert_config_from_hf(hf_config: dict[str, Any], source: str = "config.json") -> BertConfig:
    """The `BertConfig` of a Hugging Face BERT config.

    Raises:
        UnsupportedCheckpointError: not a BERT config, or one this project does not compute.
    """
    model_type = hf_config.get("model_type")
    if model_type != "bert":
        raise UnsupportedCheckpointError(
            f"{source}: model_type {model_type!r} (architectures "
            f"{hf_config.get('architectures')}) is not BERT")
    for key, value in _REQUIRED_SETTINGS:
        if key in hf_config and hf_config[key] != value:
            raise UnsupportedCheckpointError(
                f"{source}: {key}={hf_config[key]!r}; this project computes {key}={value!r}")
    values = {**HF_DEFAULTS, **{k: hf_config[k] for k in HF_DEFAULTS if k in hf_config}}
    activation = values["hidden_act"]
    if activation not in ACTIVATIONS_FROM_HF:
        raise UnsupportedCheckpointError(
            f"{source}: hidden_act {activation!r} is not supported; supported: "
            f"{', '.join(ACTIVATIONS_FROM_HF)}")
    values["hidden_act"] = ACTIVATIONS_FROM_HF[activation]
    values.update({k: hf_config[k] for k in RELEASE_EXTRA_KEYS if k in hf_config})
    return BertConfig.from_dict(values, source=source)


def labels_from_hf(hf_config: dict[str, Any], num_labels: int | None) -> tuple[str, ...] | None:
    """The label names of `id2label`, by id; None without names (transformers' `LABEL_i`)."""
    id2label = hf_config.get("id2label") or {}
    if not num_labels or not isinstance(id2label, dict):
        return None
    labels = tuple(str(id2label.get(str(i), id2label.get(i, f"LABEL_{i}")))
                   for i in range(num_labels))
    return None if labels == tuple(f"LABEL_{i}" for i in range(num_labels)) else labels


def hf_config_from_bert(config: BertConfig, spec: ModelSpec,
                        labels: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The Hugging Face `config.json` content of a model with this config and head (and, for a
    fine-tuned one, its label names, else transformers' `LABEL_i`)."""
    values = config.to_dict()
    values["hidden_act"] = ACTIVATIONS_TO_HF[config.hidden_act.lower()]
    values.update({key: value for key, value in _REQUIRED_SETTINGS
                   if key != "position_embedding_type"})
    values.update(model_type="bert", architectures=[ARCHITECTURES[spec.head]], pad_token_id=0,
                  tie_word_embeddings=True)
    if spec.num_labels is not None:
        names = labels or [f"LABEL_{i}" for i in range(spec.num_labels)]
        id2label = {str(i): name for i, name in enumerate(names)}
        values.update(id2label=id2label, label2id={v: int(k) for k, v in id2label.items()})
        if spec.head == "classifier":
            values["problem_type"] = ("regression" if spec.num_labels == 1
                                      else "single_label_classification")
    return values


def hf_tokenizer_config(config: BertConfig, do_lower_case: bool) -> dict[str, Any]:
    """`tokenizer_config.json` of the original WordPiece tokenizer with this casing."""
    return {"tokenizer_class": "BertTokenizer", "do_lower_case": do_lower_case,
            "tokenize_chinese_chars": True, "strip_accents": None,
            "model_max_length": config.max_position_embeddings, **_SPECIAL_TOKENS}

