"""The JSON files of a KerasHub BERT preset <-> this project's `BertConfig`, head and casing.

A preset's JSON files are Keras serializations (`module`, `class_name`, `config`,
`registered_name`). They are read here as plain JSON: the classes they name are compared with the
names of KerasHub's BERT classes, never looked up or built. What KerasHub 0.32's `BertBackbone`
computes and its config cannot change is fixed here: GELU's tanh approximation
(`gelu_approximate`, the original's `"gelu"`), LayerNorm epsilon 1e-12, one dropout rate for the
embeddings, the attention probabilities and the Transformer outputs, and a truncated-normal
initialiser of stddev 0.02.
"""
from __future__ import annotations

import datetime
import logging
from typing import Any

import keras

from modeling.checkpoints.errors import UnsupportedCheckpointError
from modeling.config import BertConfig

KERAS_HUB_VERSION = "0.32.0"  # the release whose layout this module reads and writes
BACKBONE, TOKENIZER = "keras_hub>BertBackbone", "keras_hub>BertTokenizer"
CLASSIFIER, MASKED_LM, EMBEDDER = ("keras_hub>BertTextClassifier", "keras_hub>BertMaskedLM",
                                   "keras_hub>BertTextEmbedder")
CLASSIFIER_PREPROCESSOR = "keras_hub>BertTextClassifierPreprocessor"
HIDDEN_ACT = "gelu"  # BertBackbone's gelu_approximate: this project's "gelu"
INITIALIZER_RANGE = 0.02
CLASSIFIER_DROPOUT = 0.1  # the original classifier's, and BertTextClassifier's default
# BertBackbone's config keys -> this project's, with BertBackbone's defaults (None: required).
_BACKBONE_KEYS = {
    "vocabulary_size": ("vocab_size", None),
    "num_layers": ("num_hidden_layers", None),
    "num_heads": ("num_attention_heads", None),
    "hidden_dim": ("hidden_size", None),
    "intermediate_dim": ("intermediate_size", None),
    "max_sequence_length": ("max_position_embeddings", 512),
    "num_segments": ("type_vocab_size", 2),
}
_KERAS_KEYS = ("name", "trainable", "dtype")
# Dtype policies whose weights are floats that widen exactly to float32.
_FLOAT_POLICIES = ("float32", "float16", "bfloat16", "mixed_float16", "mixed_bfloat16")
_CLASSIFIER_ACTIVATIONS = (None, "linear", "softmax")  # logits, or their softmax


def serialized(module: str, class_name: str, config: dict[str, Any]) -> dict[str, Any]:
    """A Keras serialization of a KerasHub class, as `save_to_preset` writes it."""
    return {"module": f"keras_hub.src.models.bert.{module}", "class_name": class_name,
            "config": config, "registered_name": f"keras_hub>{class_name}"}


def _dtype(name: str) -> dict[str, Any]:
    return {"module": "keras", "class_name": "DTypePolicy", "config": {"name": name},
            "registered_name": None}


def check_class(values: dict[str, Any], expected: tuple[str, ...], source: str) -> str:
    """The `registered_name` of a serialized object, one of `expected`."""
    name = values.get("registered_name")
    if name not in expected:
        raise UnsupportedCheckpointError(
            f"{source} holds {name or values.get('class_name')!r}; read here: "
            f"{', '.join(expected)}")
    return name


def bert_config_from_backbone(serialized_backbone: dict[str, Any], source: str) -> BertConfig:
    """The `BertConfig` of a `BertBackbone`'s config.json (its `config` object).

    Raises:
        UnsupportedCheckpointError: not a BertBackbone, keys this project does not know, a
            quantized dtype.
    """
    check_class(serialized_backbone, (BACKBONE,), source)
    config = serialized_backbone.get("config") or {}
    unknown = sorted(set(config) - set(_BACKBONE_KEYS) - set(_KERAS_KEYS) - {"dropout"})
    if unknown:
        raise UnsupportedCheckpointError(
            f"{source}: BertBackbone keys this project does not compute: {', '.join(unknown)}")
    check_dtype(config.get("dtype"), source)
    missing = [key for key, (_, default) in _BACKBONE_KEYS.items()
               if default is None and key not in config]
    if missing:
        raise UnsupportedCheckpointError(
            f"{source}: BertBackbone config lacks {', '.join(missing)}")
    values = {ours: config.get(key, default) for key, (ours, default) in _BACKBONE_KEYS.items()}
    dropout = config.get("dropout", 0.1)
    values.update(hidden_act=HIDDEN_ACT, hidden_dropout_prob=dropout,
                  attention_probs_dropout_prob=dropout, initializer_range=INITIALIZER_RANGE)
    return BertConfig.from_dict(values, source=source)


def check_dtype(dtype: Any, source: str) -> None:
    """Refuses a dtype policy whose weights are not plain floats (a quantized preset)."""
    if isinstance(dtype, dict):
        name = (dtype.get("config") or {}).get("name")
        if dtype.get("class_name") != "DTypePolicy":  # a DTypePolicyMap: quantized layers
            name = dtype.get("class_name")
    else:
        name = dtype
    if name is not None and name not in _FLOAT_POLICIES:
        raise UnsupportedCheckpointError(
            f"{source}: dtype {name!r} is not read (only float weights: "
            f"{', '.join(_FLOAT_POLICIES)})")


def check_activation(config: BertConfig) -> None:
    """Refuses a model whose activation BertBackbone does not compute."""
    if config.hidden_act.lower() != HIDDEN_ACT:
        raise UnsupportedCheckpointError(
            f"hidden_act={config.hidden_act!r}: KerasHub's BertBackbone computes GELU's tanh "
            "approximation (this project's \"gelu\") and its config cannot name another "
            "activation; the model would compute something else")


def backbone_config(config: BertConfig) -> dict[str, Any]:
    """config.json of the `BertBackbone` of a model with this config; what it cannot hold and
    only training reads (a second dropout rate, initializer_range) is named in a warning.

    Raises:
        UnsupportedCheckpointError: an activation BertBackbone does not compute.
    """
    check_activation(config)
    if config.attention_probs_dropout_prob != config.hidden_dropout_prob:
        logging.warning(
            "KerasHub's BertBackbone has one dropout rate: dropout=%s (hidden_dropout_prob) is "
            "written, attention_probs_dropout_prob=%s is not (training only)",
            config.hidden_dropout_prob, config.attention_probs_dropout_prob)
    if config.initializer_range != INITIALIZER_RANGE:
        logging.warning("KerasHub initialises new layers with stddev %s; initializer_range=%s "
                        "is not written", INITIALIZER_RANGE, config.initializer_range)
    values = {"name": "bert_backbone", "trainable": True, "dtype": _dtype("float32")}
    values.update({key: getattr(config, ours) for key, (ours, _) in _BACKBONE_KEYS.items()})
    values["dropout"] = config.hidden_dropout_prob
    ordered = ("name", "trainable", "dtype", "vocabulary_size", "num_layers", "num_heads",
               "hidden_dim", "intermediate_dim", "dropout", "max_sequence_length", "num_segments")
    return serialized("bert_backbone", "BertBackbone", {key: values[key] for key in ordered})


def tokenizer_config(do_lower_case: bool) -> dict[str, Any]:
    """tokenizer.json of the original WordPiece tokenizer with this casing: lower-casing strips
    accents too, as the original's BasicTokenizer does."""
    return serialized("bert_tokenizer", "BertTokenizer", {
        "name": "bert_tokenizer", "trainable": True, "dtype": _dtype("int32"),
        "config_file": "tokenizer.json", "vocabulary": None, "sequence_length": None,
        "lowercase": do_lower_case, "strip_accents": do_lower_case, "split": True,
        "suffix_indicator": "##", "oov_token": "[UNK]", "special_tokens": None,
        "special_tokens_in_strings": False})


def do_lower_case_from_tokenizer(values: dict[str, Any], source: str) -> bool:
    """The casing of a `BertTokenizer`'s tokenizer.json.

    Raises:
        UnsupportedCheckpointError: another tokenizer, or WordPiece settings the original's
            tokenizer does not have.
    """
    check_class(values, (TOKENIZER,), source)
    config = values.get("config") or {}
    for key, original in (("suffix_indicator", "##"), ("oov_token", "[UNK]"), ("split", True)):
        if config.get(key, original) != original:
            raise UnsupportedCheckpointError(
                f"{source}: {key}={config[key]!r}; the original tokenizer has {original!r}")
    lowercase = bool(config.get("lowercase", False))
    if bool(config.get("strip_accents", False)) != lowercase:
        logging.warning(
            "%s: lowercase=%s with strip_accents=%s; this project's do_lower_case=%s %s accents, "
            "as the original tokenizer does", source, lowercase, config.get("strip_accents"),
            lowercase, "strips" if lowercase else "keeps")
    return lowercase


def classifier_preprocessor(do_lower_case: bool, sequence_length: int) -> dict[str, Any]:
    """preprocessor.json of a BertTextClassifier."""
    return serialized("bert_text_classifier_preprocessor", "BertTextClassifierPreprocessor", {
        "name": "bert_text_classifier_preprocessor", "trainable": True,
        "dtype": _dtype("float32"), "tokenizer": tokenizer_config(do_lower_case),
        "config_file": "preprocessor.json", "sequence_length": sequence_length,
        "truncate": "round_robin"})


def classifier_task(backbone: dict[str, Any], preprocessor: dict[str, Any],
                    num_labels: int) -> dict[str, Any]:
    """task.json of a BertTextClassifier: logits (no activation), the original's dropout."""
    return serialized("bert_text_classifier", "BertTextClassifier", {
        "backbone": backbone, "preprocessor": preprocessor, "name": "bert_text_classifier",
        "num_classes": num_labels, "activation": "linear", "dropout": CLASSIFIER_DROPOUT})


def metadata(parameter_count: int) -> dict[str, Any]:
    """metadata.json, as `save_to_preset` writes it."""
    return {"keras_version": keras.version(), "keras_hub_version": KERAS_HUB_VERSION,
            "parameter_count": parameter_count,
            "date_saved": datetime.datetime.now().strftime("%Y-%m-%d@%H:%M:%S"),
            "tasks": ["MaskedLM", "TextClassifier", "TextEmbedder"]}


def task_head(task: dict[str, Any], backbone: dict[str, Any], source: str) -> str:
    """The task class of a task.json over this backbone: CLASSIFIER, MASKED_LM or EMBEDDER.

    Raises:
        UnsupportedCheckpointError: another task, a backbone other than config.json's, or a
            classifier activation this project's classifier does not compute.
    """
    name = check_class(task, (CLASSIFIER, MASKED_LM, EMBEDDER), source)
    config = task.get("config") or {}
    inner = (config.get("backbone") or {}).get("config") or {}
    outer = backbone.get("config") or {}
    differ = sorted(key for key in _BACKBONE_KEYS if inner.get(key) != outer.get(key))
    if differ:
        raise UnsupportedCheckpointError(
            f"{source}: its backbone differs from config.json's in {', '.join(differ)}")
    if name == CLASSIFIER:
        if config.get("activation") not in _CLASSIFIER_ACTIVATIONS:
            raise UnsupportedCheckpointError(
                f"{source}: activation {config.get('activation')!r}; this project's classifier "
                "computes logits and their softmax")
        if config.get("dropout", CLASSIFIER_DROPOUT) != CLASSIFIER_DROPOUT:
            logging.warning("%s: dropout=%s is not carried; this project's classifier uses the "
                            "original's %s (training only)", source, config.get("dropout"),
                            CLASSIFIER_DROPOUT)
    elif name == EMBEDDER:
        logging.warning("%s: BertTextEmbedder's pooling (pooling_mode=%r, normalize=%r) is a "
                        "setting of KerasHub's task, not a weight: the encoder is read without it",
                        source, config.get("pooling_mode", "mean"), config.get("normalize", True))
    return name
