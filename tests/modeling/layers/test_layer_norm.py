"""`LayerNorm` against hand-computed values and against Keras's `LayerNormalization`."""
import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling.layers.layer_norm import LayerNorm


def _pair(width: int):
    """A LayerNorm and a Keras LayerNormalization with the same random gamma and beta."""
    rng = np.random.default_rng(0)
    gamma, beta = rng.normal(size=(2, width)).astype(np.float32)
    ours, theirs = LayerNorm(epsilon=1e-12), keras.layers.LayerNormalization(epsilon=1e-12)
    for layer in (ours, theirs):
        layer.build((None, width))
        layer.gamma.assign(gamma)
        layer.beta.assign(beta)
    return ours, theirs


def test_hand_computed():
    layer = LayerNorm(epsilon=0.0)
    layer.build((None, 4))
    layer.gamma.assign([1.0, 2.0, 1.0, 1.0])
    layer.beta.assign([0.0, 0.0, 0.0, 10.0])
    # mean 2.5, variance 1.25: (x - 2.5) / sqrt(1.25)
    out = layer(tf.constant([[1.0, 2.0, 3.0, 4.0]])).numpy()
    scale = 1.0 / np.sqrt(1.25)
    np.testing.assert_allclose(out, [[-1.5 * scale, -1.0 * scale, 0.5 * scale, 10 + 1.5 * scale]],
                               rtol=1e-6)


def test_weights_are_named_as_the_checkpoints_expect():
    layer = LayerNorm(name="layer_norm")
    layer.build((None, 8))
    assert [w.path for w in layer.weights] == ["layer_norm/gamma", "layer_norm/beta"]


@pytest.mark.parametrize("shape", [(5, 32), (2, 7, 32)])
def test_matches_keras_layer_normalization_and_its_gradients(shape):
    ours, theirs = _pair(shape[-1])
    x = tf.constant(np.random.default_rng(2).normal(3.0, 2.0, size=shape).astype(np.float32))
    upstream = tf.constant(np.random.default_rng(3).normal(size=shape).astype(np.float32))
    results = []
    for layer in (ours, theirs):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(layer(x) * upstream)
        results.append([layer(x)] + tape.gradient(loss, [x, layer.gamma, layer.beta]))
    for a, b in zip(*results):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-5)


def test_mixed_bfloat16_computes_in_float32():
    keras.mixed_precision.set_dtype_policy("mixed_bfloat16")
    try:
        layer = LayerNorm()
        layer.build((None, 64))
        assert layer.gamma.dtype == "float32"
        # Inputs exact in bfloat16 (multiples of 8 in [1024, 2048)) whose mean, 1276, is not:
        # in bfloat16 the mean would round by 4, an error of 0.03 in every output.
        x = 1024.0 + 8.0 * np.arange(64, dtype=np.float32)
        out = layer(tf.constant(x[None], tf.bfloat16))
    finally:
        keras.mixed_precision.set_dtype_policy("float32")
    assert out.dtype == tf.bfloat16
    expected = (x - x.mean()) / x.std()
    # Only the output's own rounding (2^-8 relative, |expected| < 1.8) is left.
    np.testing.assert_allclose(tf.cast(out, tf.float32).numpy()[0], expected, atol=2 ** -8 * 1.8)
