import functools

import numpy as np
import pytest
import tensorflow as tf

from modeling.checkpoints.tf1.checkpoint import load_tf1_checkpoint
from modeling.config import BertConfig
from modeling.layers.activations import gelu, gelu_exact
from modeling.models.encoder import BertEncoder
from modeling.models.pretrainer import BertPretrainer
from tests.support.modeling_fixtures import (at_real_tokens, golden, golden_inputs, tiny_config,
                                             tiny_dir)

ATOL_HIDDEN = 1e-5


@pytest.fixture(scope="module", params=[True, False], ids=["packed", "padded"])
def tiny_pretrainer(fixtures_dir, request):
    model = BertPretrainer(tiny_config(fixtures_dir), packed=request.param)
    load_tf1_checkpoint(model, str(tiny_dir(fixtures_dir) / "bert_model.ckpt"))
    return model


def _expected(model, values: dict, key: str) -> np.ndarray:
    """The original's [..., B, T, H] output `key`; zeros at padding for a packed encoder."""
    if model.encoder.packed:
        return at_real_tokens(values[key], values["inputs/input_mask"])
    return values[key]


@pytest.mark.parametrize("length", [16, 64])
@pytest.mark.parametrize("jit_compile", [False, True])
def test_hidden_states_match_the_original(tiny_pretrainer, fixtures_dir, length, jit_compile):
    values = golden(fixtures_dir, length)
    run = tf.function(lambda x: tiny_pretrainer.encoder(x, training=False),
                      jit_compile=jit_compile)
    outputs = run({k: v for k, v in golden_inputs(values).items() if k != "masked_lm_positions"})
    expected = functools.partial(_expected, tiny_pretrainer, values)
    np.testing.assert_allclose(outputs["embedding_output"], expected("embedding_output"),
                               atol=ATOL_HIDDEN)
    np.testing.assert_allclose(np.stack(outputs["encoder_outputs"]),
                               expected("all_encoder_layers"), atol=ATOL_HIDDEN)
    np.testing.assert_allclose(outputs["sequence_output"], expected("sequence_output"),
                               atol=ATOL_HIDDEN)
    np.testing.assert_allclose(outputs["pooled_output"], values["pooled_output"],
                               atol=ATOL_HIDDEN)


def test_eager_call_matches_the_original(tiny_pretrainer, fixtures_dir):
    values = golden(fixtures_dir, 16)
    inputs = golden_inputs(values)
    outputs = tiny_pretrainer.encoder({k: inputs[k] for k in ("input_ids", "input_mask",
                                                               "segment_ids")})
    np.testing.assert_allclose(outputs["sequence_output"],
                               _expected(tiny_pretrainer, values, "sequence_output"),
                               atol=ATOL_HIDDEN)


def test_padding_does_not_change_real_positions():
    config = BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0, type_vocab_size=3)
    encoder = BertEncoder(config)
    rng = np.random.default_rng(0)
    ids = rng.integers(1, 50, size=(2, 7)).astype(np.int32)
    segments = rng.integers(0, 3, size=(2, 7)).astype(np.int32)
    short = encoder({"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": segments})
    pad = np.zeros((2, 5), np.int32)
    long = encoder({"input_ids": np.concatenate([ids, pad + 9], 1),
                    "input_mask": np.concatenate([np.ones_like(ids), pad], 1),
                    "segment_ids": np.concatenate([segments, pad], 1)})
    np.testing.assert_allclose(long["sequence_output"][:, :7], short["sequence_output"], atol=1e-5)
    np.testing.assert_allclose(long["pooled_output"], short["pooled_output"], atol=1e-5)


def test_any_length_up_to_max_positions_and_batch_size():
    config = BertConfig(vocab_size=20, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=24)
    encoder = BertEncoder(config)
    for batch, length in [(1, 1), (3, 24), (5, 9)]:
        ids = np.ones((batch, length), np.int32)
        outputs = encoder({"input_ids": ids, "input_mask": ids, "segment_ids": 0 * ids})
        assert outputs["sequence_output"].shape == (batch, length, 16)
        assert len(outputs["encoder_outputs"]) == 1


@pytest.mark.parametrize("layers,hidden,expected", [
    (12, 768, 109_482_240), pytest.param(24, 1024, 335_141_888, marks=pytest.mark.slow),
    (2, 128, 4_385_920)])
def test_parameter_counts_equal_the_released_models(layers, hidden, expected):
    """BERT-Base, BERT-Large and the small L-2/H-128 (uncased vocabulary)."""
    config = BertConfig(vocab_size=30522, hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=hidden // 64, intermediate_size=4 * hidden,
                        max_position_embeddings=512, type_vocab_size=2)
    assert BertEncoder(config).count_params() == expected


def test_gelu_forms_against_hand_computed_values():
    x = tf.constant([-2.0, -0.5, 0.0, 1.0, 3.0])
    # 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))) and x * Phi(x), computed with numpy/math.
    xs = x.numpy().astype(np.float64)
    tanh_form = 0.5 * xs * (1 + np.tanh(np.sqrt(2 / np.pi) * (xs + 0.044715 * xs ** 3)))
    from math import erf, sqrt
    erf_form = np.array([v * 0.5 * (1 + erf(v / sqrt(2))) for v in xs])
    np.testing.assert_allclose(gelu(x), tanh_form, atol=1e-6)
    np.testing.assert_allclose(gelu_exact(x), erf_form, atol=1e-6)
    assert np.abs(tanh_form - erf_form).max() > 1e-4  # the two forms are distinguishable
