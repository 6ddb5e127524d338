"""`TransformerLayer`: the post-LN block against a NumPy recomputation and its invariants."""
import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling.layers.attention import attention_mask_from_input_mask
from modeling.layers.transformer_layer import TransformerLayer
from tests.support.layer_reference import randomize, reference_attention

H, N, I = 8, 2, 16


def _layer(hidden_act="gelu", dropout=0.0, seed=0, **kwargs):
    layer = TransformerLayer(H, N, I, hidden_act, dropout, dropout, 0.02, **kwargs)
    layer.build((None, None, H))
    randomize(layer, seed)
    return layer


def _layer_norm(x, gamma, beta):
    centered = x - x.mean(-1, keepdims=True)
    return centered / np.sqrt((centered ** 2).mean(-1, keepdims=True) + 1e-12) * gamma + beta


_ACTIVATIONS = {
    "gelu": lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
    "relu": lambda x: np.maximum(x, 0.0),
    "linear": lambda x: x,
}


def _reference(layer, states, input_mask, hidden_act):
    """attention -> dense -> LN(x + input) -> act(dense) -> dense -> LN(x + attention output)."""
    def dense(sublayer, x):
        kernel, bias = sublayer.get_weights()
        return x @ kernel.astype(np.float64) + bias

    def norm(sublayer, x):
        return _layer_norm(x, *(w.astype(np.float64) for w in sublayer.get_weights()))

    states = states.astype(np.float64)
    context = reference_attention(layer.attention, states, input_mask)
    attention_output = norm(layer.attention_layer_norm,
                            dense(layer.attention_output, context) + states)
    intermediate = _ACTIVATIONS[hidden_act](dense(layer.intermediate, attention_output))
    return norm(layer.output_layer_norm, dense(layer.output_dense, intermediate) + attention_output)


@pytest.mark.parametrize("hidden_act", ["gelu", "relu", "linear"])
def test_matches_numpy_recomputation(hidden_act):
    layer = _layer(hidden_act, seed=1)
    rng = np.random.default_rng(2)
    states = rng.normal(size=(2, 5, H)).astype(np.float32)
    input_mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], np.float32)
    output = layer(states, attention_mask_from_input_mask(input_mask), training=False)
    assert output.shape == (2, 5, H)
    np.testing.assert_allclose(output.numpy(), _reference(layer, states, input_mask, hidden_act),
                               atol=1e-4)


def test_output_is_layer_normalised_at_every_position():
    # With the initial gamma = 1 and beta = 0 of the last LayerNorm, every output vector has
    # mean 0 and variance 1, whatever the input scale.
    layer = TransformerLayer(H, N, I, "gelu", 0.1, 0.1, 0.5)
    states = np.random.default_rng(3).normal(5.0, 20.0, size=(2, 4, H)).astype(np.float32)
    attention_mask = attention_mask_from_input_mask(np.ones((2, 4), np.float32))
    for training in (False, True):
        output = layer(states, attention_mask, training=training).numpy()
        np.testing.assert_allclose(output.mean(-1), 0.0, atol=1e-5)
        np.testing.assert_allclose(output.var(-1), 1.0, atol=1e-4)


def test_zero_sublayers_leave_the_normalised_input():
    # With every dense layer zero, both sub-blocks add nothing to their residual: the output is
    # LayerNorm(LayerNorm(x)) = LayerNorm(x) (default gamma and beta).
    layer = TransformerLayer(H, N, I, "gelu", 0.0, 0.0, 0.02)
    layer.build((None, None, H))
    for dense in (layer.attention.query, layer.attention.key, layer.attention.value,
                  layer.attention_output, layer.intermediate, layer.output_dense):
        dense.set_weights([np.zeros_like(w) for w in dense.get_weights()])
    states = np.random.default_rng(4).normal(size=(1, 3, H))
    attention_mask = attention_mask_from_input_mask(np.ones((1, 3), np.float32))
    output = layer(states.astype(np.float32), attention_mask).numpy()
    np.testing.assert_allclose(output, _layer_norm(states, 1.0, 0.0), atol=1e-5)


def test_padding_does_not_change_real_positions():
    layer = _layer(seed=5)
    rng = np.random.default_rng(6)
    states = rng.normal(size=(1, 6, H)).astype(np.float32)
    input_mask = np.array([[1, 1, 1, 1, 0, 0]], np.float32)
    attention_mask = attention_mask_from_input_mask(input_mask)
    changed = states.copy()
    changed[0, 4:] = rng.normal(0.0, 10.0, size=(2, H))
    before = layer(states, attention_mask).numpy()
    after = layer(changed, attention_mask).numpy()
    np.testing.assert_allclose(after[0, :4], before[0, :4], atol=1e-6)
    assert np.abs(after[0, 4:] - before[0, 4:]).max() > 1e-3


def test_training_without_dropout_computes_the_inference_values():
    layer = _layer("gelu", dropout=0.0, seed=7)
    states = np.random.default_rng(8).normal(size=(2, 4, H)).astype(np.float32)
    attention_mask = attention_mask_from_input_mask(np.ones((2, 4), np.float32))
    np.testing.assert_allclose(layer(states, attention_mask, training=True).numpy(),
                               layer(states, attention_mask, training=False).numpy(), atol=1e-5)


def test_dropout_in_training_only():
    keras.utils.set_random_seed(0)
    layer = _layer("gelu", dropout=0.5, seed=9)
    states = np.random.default_rng(10).normal(size=(2, 4, H)).astype(np.float32)
    attention_mask = attention_mask_from_input_mask(np.ones((2, 4), np.float32))
    first = layer(states, attention_mask, training=False).numpy()
    np.testing.assert_array_equal(first, layer(states, attention_mask, training=False).numpy())
    assert np.abs(layer(states, attention_mask, training=True).numpy() - first).max() > 1e-3


def test_weight_shapes_and_names():
    layer = TransformerLayer(H, N, I, "gelu", 0.1, 0.1, 0.02, name="layer_0")
    layer.build((None, None, H))
    shapes = {w.path: tuple(w.shape) for w in layer.weights}
    assert shapes == {
        "layer_0/attention/query/kernel": (H, H), "layer_0/attention/query/bias": (H,),
        "layer_0/attention/key/kernel": (H, H), "layer_0/attention/key/bias": (H,),
        "layer_0/attention/value/kernel": (H, H), "layer_0/attention/value/bias": (H,),
        "layer_0/attention_output/kernel": (H, H), "layer_0/attention_output/bias": (H,),
        "layer_0/attention_layer_norm/gamma": (H,), "layer_0/attention_layer_norm/beta": (H,),
        "layer_0/intermediate/kernel": (H, I), "layer_0/intermediate/bias": (I,),
        "layer_0/output/kernel": (I, H), "layer_0/output/bias": (H,),
        "layer_0/output_layer_norm/gamma": (H,), "layer_0/output_layer_norm/beta": (H,),
    }
    assert layer.attention.head_size == H // N


def test_unknown_activation_fails_at_construction():
    with pytest.raises(ValueError, match="unknown hidden_act 'swish'"):
        TransformerLayer(H, N, I, "swish", 0.1, 0.1, 0.02)


def test_per_layer_mixed_bfloat16_policy():
    layer = _layer(seed=11, dtype="mixed_bfloat16")
    states = np.random.default_rng(12).normal(size=(1, 4, H)).astype(np.float32)
    input_mask = np.array([[1, 1, 1, 0]], np.float32)
    for training in (False, True):
        output = layer(states, attention_mask_from_input_mask(input_mask), training=training)
        assert output.dtype == tf.bfloat16
    assert all(w.dtype == "float32" for w in layer.weights)
    expected = _reference(layer, states, input_mask, "gelu")
    output = layer(states, attention_mask_from_input_mask(input_mask), training=False)
    # bfloat16 keeps 8 bits: a few 2^-8 relative errors through two LayerNorms.
    np.testing.assert_allclose(tf.cast(output, tf.float32).numpy(), expected, atol=0.05)
