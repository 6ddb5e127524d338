"""`modeling.layers.dropout.Dropout`: Keras' dropout contract with 16-bit random draws."""
import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling.layers.dropout import Dropout, drop


@pytest.mark.parametrize("rate", [0.1, 0.5])
def test_drops_at_the_rate_and_keeps_the_expectation(rate):
    x = tf.ones([200, 1001])  # odd size: the last word's second half unused
    y = drop(x, rate, tf.constant([7, 9])).numpy()
    kept = y != 0
    threshold = round(rate * 65536)
    np.testing.assert_allclose(y[kept], 65536 / (65536 - threshold), rtol=1e-6)
    # Binomial: 200,200 elements; 5 standard deviations.
    sd = np.sqrt(rate * (1 - rate) / y.size)
    assert abs((~kept).mean() - threshold / 65536) < 5 * sd
    assert abs(y.mean() - 1.0) < 5 * sd / (1 - rate)
    # The masks of rows, columns and seeds are not the same mask.
    assert not np.array_equal(kept[0], kept[1])
    assert not np.array_equal(kept, drop(x, rate, tf.constant([7, 10])).numpy() != 0)


def test_same_seed_same_mask_and_the_gradient_is_the_mask_times_the_upstream_one():
    x = tf.random.stateless_normal([4, 3, 17, 17], [1, 2])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = drop(x, 0.1, tf.constant([3, 4]))
    upstream = tf.random.stateless_normal(x.shape, [5, 6])
    gradient = tape.gradient(y, x, output_gradients=upstream).numpy()
    np.testing.assert_array_equal(y.numpy(), drop(x, 0.1, tf.constant([3, 4])).numpy())
    scale = np.float32(65536 / (65536 - 6554))
    np.testing.assert_array_equal(gradient, np.where(y.numpy() != 0, upstream.numpy() * scale,
                                                     np.float32(0)))


def test_layer_is_identity_at_inference_and_seeded_in_training():
    keras.utils.set_random_seed(5)
    layer = Dropout(0.1)
    x = tf.ones([64, 64])
    np.testing.assert_array_equal(layer(x, training=False), x)
    first, second = layer(x, training=True).numpy(), layer(x, training=True).numpy()
    assert not np.array_equal(first, second)  # the seed generator moves on
    keras.utils.set_random_seed(5)
    np.testing.assert_array_equal(Dropout(0.1)(x, training=True), first)
    assert np.array_equal(drop(x, 1.0, tf.constant([1, 1])), tf.zeros_like(x))
