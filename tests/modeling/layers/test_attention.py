"""`SelfAttention` and the additive attention mask against hand-computed and NumPy values."""
import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling.layers.attention import AttentionMask, SelfAttention, attention_mask_from_input_mask
from tests.support.layer_reference import randomize, reference_attention


def _layer(num_heads=2, head_size=4, dropout_rate=0.0, seed=0, **kwargs):
    layer = SelfAttention(num_heads, head_size, dropout_rate, 0.02, **kwargs)
    layer.build((None, None, num_heads * head_size))
    randomize(layer, seed)
    return layer


def _probe_layer(length: int, query_scale: float, dropout_rate: float = 0.0) -> SelfAttention:
    """One head with D = H = T: fed one-hot position vectors, its output rows are the attention
    probabilities (V = identity) and its scores are query_scale * I / sqrt(T)."""
    layer = SelfAttention(1, length, dropout_rate, 0.02)
    layer.build((None, None, length))
    eye, zeros = np.eye(length, dtype=np.float32), np.zeros(length, np.float32)
    layer.query.set_weights([query_scale * eye, zeros])
    layer.key.set_weights([eye, zeros])
    layer.value.set_weights([eye, zeros])
    return layer


def test_additive_mask_from_input_mask():
    mask = attention_mask_from_input_mask(tf.constant([[1, 1, 0], [1, 0, 0]]))
    assert mask.dtype == tf.float32
    assert mask.shape == (2, 1, 1, 3)
    np.testing.assert_array_equal(mask.numpy()[:, 0, 0], [[0.0, 0.0, -10000.0],
                                                          [0.0, -10000.0, -10000.0]])
    layer_mask = AttentionMask()(tf.constant([[1, 1, 0], [1, 0, 0]]))
    np.testing.assert_array_equal(layer_mask.numpy(), mask.numpy())


def test_zero_query_and_key_spread_weight_evenly_over_real_tokens():
    layer = _probe_layer(4, query_scale=0.0)
    states = np.stack([np.eye(4, dtype=np.float32)] * 2)
    input_mask = np.array([[1, 1, 1, 0], [1, 1, 0, 0]], np.float32)
    probs = layer(states, attention_mask_from_input_mask(input_mask)).numpy()
    np.testing.assert_allclose(probs[0], np.tile([1 / 3, 1 / 3, 1 / 3, 0.0], (4, 1)), atol=1e-7)
    np.testing.assert_allclose(probs[1], np.tile([0.5, 0.5, 0.0, 0.0], (4, 1)), atol=1e-7)


def test_hand_computed_probabilities():
    # Scores (2 ln 3) I / sqrt(4) = ln(3) I: weight 3 on a real token's own position and 1 on the
    # other real ones; a padded query attends to the real keys only, evenly.
    layer = _probe_layer(4, query_scale=2.0 * math.log(3.0))
    states = np.stack([np.eye(4, dtype=np.float32)] * 2)
    input_mask = np.array([[1, 1, 1, 0], [1, 1, 0, 0]], np.float32)
    probs = layer(states, attention_mask_from_input_mask(input_mask)).numpy()
    expected_first = [[3 / 5, 1 / 5, 1 / 5, 0], [1 / 5, 3 / 5, 1 / 5, 0],
                      [1 / 5, 1 / 5, 3 / 5, 0], [1 / 3, 1 / 3, 1 / 3, 0]]
    expected_second = [[3 / 4, 1 / 4, 0, 0], [1 / 4, 3 / 4, 0, 0],
                       [1 / 2, 1 / 2, 0, 0], [1 / 2, 1 / 2, 0, 0]]
    np.testing.assert_allclose(probs[0], expected_first, atol=1e-6)
    np.testing.assert_allclose(probs[1], expected_second, atol=1e-6)


def test_dropout_acts_on_the_probabilities_in_training_only():
    keras.utils.set_random_seed(0)
    layer = _probe_layer(4, query_scale=2.0 * math.log(3.0), dropout_rate=0.5)
    states = np.eye(4, dtype=np.float32)[None]
    attention_mask = attention_mask_from_input_mask(np.ones((1, 4), np.float32))
    expected = (np.eye(4) * 2 + 1) / 6  # [3, 1, 1, 1] / 6 in each row
    np.testing.assert_allclose(layer(states, attention_mask, training=False)[0], expected,
                               atol=1e-6)
    dropped = layer(states, attention_mask, training=True).numpy()[0]
    # Each probability is dropped or scaled by 1 / (1 - 0.5).
    kept = dropped != 0
    assert 0 < kept.sum() < kept.size
    np.testing.assert_allclose(dropped[kept], 2 * expected[kept], rtol=1e-6)


@pytest.mark.parametrize("num_heads,head_size", [(1, 8), (2, 4), (4, 2)])
def test_matches_numpy_recomputation_with_the_layers_weights(num_heads, head_size):
    layer = _layer(num_heads, head_size, seed=1)
    rng = np.random.default_rng(2)
    states = rng.normal(size=(2, 5, 8)).astype(np.float32)
    input_mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], np.float32)
    output = layer(states, attention_mask_from_input_mask(input_mask), training=False)
    assert output.shape == (2, 5, 8)
    np.testing.assert_allclose(output.numpy(), reference_attention(layer, states, input_mask),
                               atol=1e-5)


def test_heads_are_independent_and_concatenated_in_order():
    layer = _layer(2, 4, seed=3)
    states = np.random.default_rng(4).normal(size=(1, 3, 8)).astype(np.float32)
    attention_mask = attention_mask_from_input_mask(np.ones((1, 3), np.float32))
    before = layer(states, attention_mask).numpy()
    # Changing the second head's query projection leaves the first head's D columns as they were.
    kernel, bias = layer.query.get_weights()
    kernel[:, 4:] *= -3.0
    layer.query.set_weights([kernel, bias])
    after = layer(states, attention_mask).numpy()
    np.testing.assert_array_equal(after[..., :4], before[..., :4])
    assert np.abs(after[..., 4:] - before[..., 4:]).max() > 1e-3


@pytest.mark.parametrize("dtype,atol", [("float32", 1e-6), ("mixed_bfloat16", 0.0)])
def test_a_masked_token_does_not_change_the_other_outputs(dtype, atol):
    layer = _layer(2, 4, seed=5, dtype=dtype)
    rng = np.random.default_rng(6)
    states = rng.normal(size=(2, 6, 8)).astype(np.float32)
    input_mask = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 0, 1, 1, 1]], np.float32)
    attention_mask = attention_mask_from_input_mask(input_mask)
    changed = states.copy()
    changed[0, 4:] = rng.normal(0.0, 10.0, size=(2, 8))
    changed[1, 2] = 50.0
    before = tf.cast(layer(states, attention_mask), tf.float32).numpy()
    after = tf.cast(layer(changed, attention_mask), tf.float32).numpy()
    np.testing.assert_allclose(after[0, :4], before[0, :4], atol=atol, rtol=0)
    np.testing.assert_allclose(after[1, [0, 1, 3, 4, 5]], before[1, [0, 1, 3, 4, 5]], atol=atol,
                               rtol=0)
    # The changed tokens' own outputs do move: they are still queries.
    assert np.abs(after[0, 4:] - before[0, 4:]).max() > 1e-3
    assert np.abs(after[1, 2] - before[1, 2]).max() > 1e-3


def test_an_unmasked_token_reaches_every_position():
    layer = _layer(2, 4, seed=7)
    rng = np.random.default_rng(8)
    states = rng.normal(size=(1, 4, 8)).astype(np.float32)
    attention_mask = attention_mask_from_input_mask(np.ones((1, 4), np.float32))
    changed = states.copy()
    changed[0, 3] += 1.0
    difference = np.abs(layer(changed, attention_mask).numpy()
                        - layer(states, attention_mask).numpy())
    assert (difference[0].max(-1) > 1e-5).all()
