"""`get_config` / `from_config` round trips of every layer and model of `modeling/` that has them.

Each case builds the object with a tiny config, calls it, re-creates it from its config (directly,
and through Keras's JSON serialisation), copies the weights over and expects the same outputs.
"""
import dataclasses
import importlib
import json
import pkgutil
from typing import Any, Callable

import keras
import numpy as np
import pytest
import tensorflow as tf

import modeling
from modeling.config import BertConfig
from modeling.layers.attention import SelfAttention, attention_mask_from_input_mask
from modeling.layers.embeddings import BertEmbeddings
from modeling.layers.layer_norm import LayerNorm
from modeling.layers.output_heads import MaskedLMHead, OutputProjection
from modeling.layers.transformer_layer import TransformerLayer
from modeling.models.bilstm_tagger import BiLstmTagger
from modeling.models.encoder import BertEncoder, Pooler
from modeling.models.pretrainer import BertPretrainer
from tests.support.layer_reference import randomize

V, H, T = 13, 8, 5
CONFIG = BertConfig(vocab_size=V, hidden_size=H, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=16, hidden_act="gelu_exact", hidden_dropout_prob=0.2,
                    attention_probs_dropout_prob=0.3, max_position_embeddings=8,
                    type_vocab_size=3, initializer_range=0.05)

_RNG = np.random.default_rng(0)
HIDDEN = _RNG.normal(size=(2, T, H)).astype(np.float32)
INPUT_MASK = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], np.int32)
ATTENTION_MASK = attention_mask_from_input_mask(INPUT_MASK)
IDS = np.array([[2, 5, 7, 3, 1], [2, 9, 3, 0, 0]], np.int32)
SEGMENTS = np.array([[0, 0, 1, 1, 2], [0, 1, 1, 0, 0]], np.int32)
POSITIONS = np.array([[1, 3], [2, 0]], np.int32)
TABLE = _RNG.normal(size=(V, H)).astype(np.float32)
ENCODER_INPUTS = {"input_ids": IDS, "input_mask": INPUT_MASK, "segment_ids": SEGMENTS}
TAGGER_INPUTS = {"features": _RNG.normal(size=(2, 4, 6)).astype(np.float32),
                 "word_mask": np.array([[1, 1, 1, 1], [1, 1, 0, 0]], np.int32)}


@dataclasses.dataclass
class Case:
    make: Callable[..., Any]
    call: Callable[[Any], Any]
    # Entries the config must hold, written out by hand.
    expected_config: dict[str, Any]


CASES = {
    "LayerNorm": Case(
        lambda **kw: LayerNorm(epsilon=1e-3, name="norm", **kw), lambda layer: layer(HIDDEN),
        {"epsilon": 1e-3, "name": "norm"}),
    "SelfAttention": Case(
        lambda **kw: SelfAttention(2, 4, 0.1, 0.05, name="attention", **kw),
        lambda layer: layer(HIDDEN, ATTENTION_MASK, training=False),
        {"num_heads": 2, "head_size": 4, "dropout_rate": 0.1, "initializer_range": 0.05,
         "name": "attention"}),
    "TransformerLayer": Case(
        lambda **kw: TransformerLayer(H, 2, 16, "relu", 0.2, 0.3, 0.05, name="layer_0", **kw),
        lambda layer: layer(HIDDEN, ATTENTION_MASK, training=False),
        {"hidden_size": H, "num_heads": 2, "intermediate_size": 16, "hidden_act": "relu",
         "hidden_dropout_prob": 0.2, "attention_probs_dropout_prob": 0.3,
         "initializer_range": 0.05, "name": "layer_0"}),
    "BertEmbeddings": Case(
        lambda **kw: BertEmbeddings(V, H, 3, 8, 0.2, 0.05, name="embeddings", **kw),
        lambda layer: layer(IDS, SEGMENTS, training=False),
        {"vocab_size": V, "hidden_size": H, "type_vocab_size": 3, "max_position_embeddings": 8,
         "dropout_rate": 0.2, "initializer_range": 0.05, "name": "embeddings"}),
    "OutputProjection": Case(
        lambda **kw: OutputProjection(3, H, 0.05, use_bias=False, name="classifier", **kw),
        lambda layer: layer(HIDDEN),
        {"num_outputs": 3, "hidden_size": H, "initializer_range": 0.05, "use_bias": False,
         "name": "classifier"}),
    "MaskedLMHead": Case(
        lambda **kw: MaskedLMHead(V, H, "gelu", 0.05, name="masked_lm", **kw),
        lambda layer: layer(HIDDEN, POSITIONS, TABLE),
        {"vocab_size": V, "hidden_size": H, "hidden_act": "gelu", "initializer_range": 0.05,
         "name": "masked_lm"}),
    "Pooler": Case(
        lambda **kw: Pooler(H, 0.05, name="pooler", **kw), lambda layer: layer(HIDDEN),
        {"hidden_size": H, "initializer_range": 0.05, "name": "pooler"}),
    "BertEncoder": Case(
        lambda: BertEncoder(CONFIG, packed=False, name="my_bert"),
        lambda model: model(ENCODER_INPUTS, training=False),
        {"config": CONFIG.to_dict(), "packed": False, "name": "my_bert"}),
    "BertPretrainer": Case(
        lambda: BertPretrainer(CONFIG, name="my_pretrainer"),
        lambda model: model({**ENCODER_INPUTS, "masked_lm_positions": POSITIONS},
                            training=False),
        {"config": CONFIG.to_dict(), "packed": True, "name": "my_pretrainer"}),
    "BiLstmTagger": Case(
        lambda: BiLstmTagger(6, 4, lstm_units=3, num_layers=1, dropout_rate=0.4,
                             initializer_range=0.05, name="tagger"),
        lambda model: model(TAGGER_INPUTS, training=False),
        {"feature_size": 6, "num_labels": 4, "lstm_units": 3, "num_layers": 1,
         "dropout_rate": 0.4, "initializer_range": 0.05, "name": "tagger"}),
}
LAYERS = ["LayerNorm", "SelfAttention", "TransformerLayer", "BertEmbeddings",
          "OutputProjection", "MaskedLMHead", "Pooler"]


def _values(outputs) -> list[np.ndarray]:
    return [np.asarray(tf.cast(x, tf.float32)) for x in tf.nest.flatten(outputs)]


def _built(case: Case, seed: int, **kwargs):
    """The object of `case`, called once (so built) and given random weights."""
    obj = case.make(**kwargs)
    case.call(obj)
    randomize(obj, seed)
    return obj


def _assert_same_outputs(case, original, clone):
    expected, actual = _values(case.call(original)), _values(case.call(clone))
    assert len(actual) == len(expected)
    for a, b in zip(actual, expected):
        np.testing.assert_array_equal(a, b)


def _assert_weights_copy_over(case, original, clone):
    case.call(clone)
    assert [w.path for w in clone.weights] == [w.path for w in original.weights]
    # Freshly initialised, the clone computes something else: the copy below is what matters.
    differences = [np.abs(a - b).max() for a, b in zip(_values(case.call(clone)),
                                                      _values(case.call(original)))]
    assert max(differences) > 1e-3
    clone.set_weights(original.get_weights())
    _assert_same_outputs(case, original, clone)


def test_every_class_with_get_config_has_a_case():
    found = set()
    for info in pkgutil.walk_packages(modeling.__path__, "modeling."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if (isinstance(value, type) and value.__module__ == module.__name__
                    and "get_config" in vars(value)):
                found.add(name)
    assert found == set(CASES)


@pytest.mark.parametrize("name", list(CASES))
def test_from_config_round_trip(name):
    case = CASES[name]
    original = _built(case, seed=1)
    config = original.get_config()
    assert config.items() >= case.expected_config.items()
    clone = type(original).from_config(config)
    assert type(clone) is type(original)
    assert clone.get_config() == config
    _assert_weights_copy_over(case, original, clone)


@pytest.mark.parametrize("name", list(CASES))
def test_keras_serialization_round_trip_through_json(name):
    case = CASES[name]
    original = _built(case, seed=2)
    serialized = json.loads(json.dumps(keras.saving.serialize_keras_object(original)))
    assert serialized["class_name"] == name
    assert serialized["config"].items() >= case.expected_config.items()
    # None of these classes is registered with Keras: `custom_objects` names the class.
    clone = keras.saving.deserialize_keras_object(
        serialized, custom_objects={name: type(original)})
    assert type(clone) is type(original)
    assert clone.get_config() == original.get_config()
    _assert_weights_copy_over(case, original, clone)


@pytest.mark.parametrize("name", LAYERS)
def test_per_layer_mixed_bfloat16_policy_survives_the_round_trip(name):
    case = CASES[name]
    original = _built(case, seed=3, dtype="mixed_bfloat16")
    clone = type(original).from_config(original.get_config())
    assert clone.dtype_policy.name == "mixed_bfloat16"
    case.call(clone)
    assert all(w.dtype == "float32" for w in clone.weights)
    clone.set_weights(original.get_weights())
    _assert_same_outputs(case, original, clone)
    # Heads give float32 logits; the other layers compute in bfloat16.
    dtypes = {x.dtype for x in tf.nest.flatten(case.call(clone))}
    assert dtypes == ({tf.float32} if name in ("OutputProjection", "MaskedLMHead")
                      else {tf.bfloat16})
