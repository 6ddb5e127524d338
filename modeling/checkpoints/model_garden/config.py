"""Model Garden encoder configs <-> this project's `BertConfig`.

Model Garden (`tensorflow/models`, `official/nlp`) describes a BERT encoder in two places: the
`task.model` section of an experiment's `params.yaml` (`encoders.BertEncoderConfig` under
`encoder.bert`), and the Keras config of its `BertEncoder` stored in a TF-Hub SavedModel
(`keras_metadata.pb`). Both map key for key onto `bert_config.json`. Model Garden's `BertEncoder`
computes what the original computes (post-LayerNorm blocks, LayerNorm epsilon 1e-12 everywhere,
tanh pooler); its attention adds -1e9 rather than -10000 on padding, which gives the same float32
probabilities (both exponentials underflow to 0). A config this project cannot represent
(pre-LayerNorm blocks, a factorized embedding, a truncated output range, another encoder type or
activation) is refused with the key that says so.
"""
from __future__ import annotations

import os
from typing import Any

import yaml

from modeling.checkpoints.errors import UnsupportedCheckpointError
from modeling.config import BertConfig

PARAMS_FILE = "params.yaml"
# `hidden_activation` names (resolved by `official.modeling.tf_utils.get_activation`, whose
# "gelu" is the tanh approximation) -> `hidden_act`.
ACTIVATIONS_FROM_MODEL_GARDEN = {"gelu": "gelu", "relu": "relu", "tanh": "tanh",
                                 "linear": "linear", "identity": "linear"}
ACTIVATIONS_TO_MODEL_GARDEN = {"gelu": "gelu", "relu": "relu", "tanh": "tanh",
                               "linear": "linear"}
# Serialized Keras activations of a saved `BertEncoder`: Model Garden's registered "Text>gelu" is
# the tanh approximation, Keras' own "gelu" the exact one.
KERAS_ACTIVATIONS = {"Text>gelu": "gelu", "gelu": "gelu_exact", "relu": "relu", "tanh": "tanh",
                     "linear": "linear"}
# BertEncoderConfig key -> bert_config.json key.
_PARAMS_KEYS = {"vocab_size": "vocab_size", "hidden_size": "hidden_size",
                "num_layers": "num_hidden_layers", "num_attention_heads": "num_attention_heads",
                "intermediate_size": "intermediate_size", "dropout_rate": "hidden_dropout_prob",
                "attention_dropout_rate": "attention_probs_dropout_prob",
                "max_position_embeddings": "max_position_embeddings",
                "type_vocab_size": "type_vocab_size", "initializer_range": "initializer_range"}
# Keras config key of a saved BertEncoder -> bert_config.json key.
_KERAS_KEYS = {"vocab_size": "vocab_size", "hidden_size": "hidden_size",
               "num_layers": "num_hidden_layers", "num_attention_heads": "num_attention_heads",
               "inner_dim": "intermediate_size", "output_dropout": "hidden_dropout_prob",
               "attention_dropout": "attention_probs_dropout_prob",
               "max_sequence_length": "max_position_embeddings",
               "type_vocab_size": "type_vocab_size"}


def _refuse_unrepresentable(values: dict[str, Any], hidden_size: int, source: str) -> None:
    if values.get("norm_first"):
        raise UnsupportedCheckpointError(
            f"{source}: norm_first=True (pre-LayerNorm blocks); this project computes the "
            "original's post-LayerNorm blocks")
    for key in ("embedding_size", "embedding_width"):
        if values.get(key) not in (None, hidden_size):
            raise UnsupportedCheckpointError(
                f"{source}: {key}={values[key]} differs from hidden_size={hidden_size} (a "
                "factorized embedding); this project's embeddings are hidden_size wide")
    if values.get("output_range") is not None:
        raise UnsupportedCheckpointError(
            f"{source}: output_range={values['output_range']}; this project outputs every "
            "position")


def _activation(name: Any, table: dict[str, str], source: str) -> str:
    if name not in table:
        raise UnsupportedCheckpointError(
            f"{source}: activation {name!r} is not supported; supported: {', '.join(table)}")
    return table[name]


def read_params(folder: str) -> dict[str, Any] | None:
    """The `task.model` section of the `params.yaml` in `folder`; None where there is none."""
    path = os.path.join(folder, PARAMS_FILE)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        params = yaml.safe_load(f) or {}
    model = params.get("task", {}).get("model")
    if not isinstance(model, dict) or "encoder" not in model:
        raise UnsupportedCheckpointError(f"{path}: no task.model.encoder section")
    return model


def bert_config_from_params(model_params: dict[str, Any], source: str) -> BertConfig:
    """The `BertConfig` of a Model Garden `task.model` section (a `bert` encoder).

    Raises:
        UnsupportedCheckpointError: another encoder type, or a setting this project does not
            compute.
    """
    encoder = model_params["encoder"]
    if encoder.get("type") != "bert":
        raise UnsupportedCheckpointError(
            f"{source}: encoder type {encoder.get('type')!r}; only `bert` is read")
    values = encoder.get("bert", {})
    config = {ours: values[theirs] for theirs, ours in _PARAMS_KEYS.items() if theirs in values}
    config["hidden_act"] = _activation(values.get("hidden_activation", "gelu"),
                                       ACTIVATIONS_FROM_MODEL_GARDEN, source)
    bert_config = BertConfig.from_dict(config, source=source)
    _refuse_unrepresentable(values, bert_config.hidden_size, source)
    return bert_config


def check_masked_lm_activation(model_params: dict[str, Any], source: str) -> None:
    """Refuses a masked-LM head whose activation (`mlm_activation`) is not the encoder's: this
    project's masked-LM transform uses hidden_act. (An encoder alone is read whatever its
    `mlm_activation` says.)"""
    hidden = model_params["encoder"].get("bert", {}).get("hidden_activation", "gelu")
    mlm_activation = model_params.get("mlm_activation", hidden)
    if mlm_activation != hidden:
        raise UnsupportedCheckpointError(
            f"{source}: mlm_activation={mlm_activation!r} differs from hidden_activation="
            f"{hidden!r}; this project's masked-LM transform uses hidden_act")


def params_from_bert_config(config: BertConfig, masked_lm: bool = False,
                            next_sentence: bool = False) -> dict[str, Any]:
    """The `task.model` section that Model Garden builds this config's encoder (and the masked-LM
    and next-sentence heads) from."""
    bert = {theirs: getattr(config, ours) for theirs, ours in _PARAMS_KEYS.items()}
    if config.hidden_act.lower() not in ACTIVATIONS_TO_MODEL_GARDEN:
        raise UnsupportedCheckpointError(
            f"Model Garden's params.yaml has no name for hidden_act={config.hidden_act!r} (it "
            f"names {', '.join(ACTIVATIONS_TO_MODEL_GARDEN)}); Model Garden would compute "
            "another function")
    bert.update(hidden_activation=ACTIVATIONS_TO_MODEL_GARDEN[config.hidden_act.lower()],
                embedding_size=None, output_range=None, norm_first=False)
    model = {"encoder": {"type": "bert", "bert": bert}}
    if masked_lm:
        model.update(mlm_activation=bert["hidden_activation"])
    if next_sentence:
        model.update(cls_heads=[{
            "activation": "tanh", "cls_token_idx": 0, "dropout_rate": config.hidden_dropout_prob,
            "inner_dim": config.hidden_size, "name": "next_sentence", "num_classes": 2}])
    return model


def bert_config_from_keras(values: dict[str, Any], source: str) -> BertConfig:
    """The `BertConfig` of the Keras config of a saved Model Garden `BertEncoder`."""
    config = {ours: values[theirs] for theirs, ours in _KERAS_KEYS.items() if theirs in values}
    config["hidden_act"] = _activation(values.get("inner_activation"), KERAS_ACTIVATIONS, source)
    initializer = values.get("initializer") or {}
    if "stddev" in initializer.get("config", {}):
        config["initializer_range"] = initializer["config"]["stddev"]
    bert_config = BertConfig.from_dict(config, source=source)
    _refuse_unrepresentable(values, bert_config.hidden_size, source)
    return bert_config
