"""Tests of modeling/layers/activations.py: the training forms equal the inference forms, with
gradients."""
import numpy as np
import pytest
import tensorflow as tf

from modeling.layers.activations import get_activation


def _reference(name: str, x: tf.Tensor) -> tf.Tensor:
    """The original code's formulas, differentiated by TensorFlow."""
    if name == "gelu":
        return 0.5 * x * (1.0 + tf.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * tf.pow(x, 3))))
    return x * 0.5 * (1.0 + tf.math.erf(x / np.sqrt(2.0)))


@pytest.mark.parametrize("name", ["gelu", "gelu_exact"])
# float64 checks the derivative itself; float32, what training computes.
@pytest.mark.parametrize("dtype,atol", [(tf.float64, 1e-9), (tf.float32, 1e-5)])
def test_training_form_has_the_values_and_gradients_of_the_formula(name, dtype, atol):
    x = tf.constant(np.linspace(-8.0, 8.0, 2001).reshape(3, 667), dtype)
    upstream = tf.constant(np.random.default_rng(0).normal(size=(3, 667)), dtype)
    results = {}
    for form, function in (("training", get_activation(name, training=True)),
                           ("reference", lambda t: _reference(name, t))):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = function(x)
        results[form] = (y.numpy(), tape.gradient(y, x, output_gradients=upstream).numpy())
    np.testing.assert_allclose(results["training"][0], results["reference"][0], atol=atol)
    np.testing.assert_allclose(results["training"][1], results["reference"][1], atol=atol)
    # The inference form (tf.nn.gelu, fused by oneDNN) computes the same values.
    np.testing.assert_allclose(get_activation(name)(x).numpy(), results["reference"][0],
                               atol=atol)


def test_other_activations_are_the_same_function_in_training():
    assert get_activation("relu", training=True) is get_activation("relu")
    with pytest.raises(ValueError, match="unknown hidden_act 'swish'"):
        get_activation("swish", training=True)
