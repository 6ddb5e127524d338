"""The feed-forward activations a `bert_config.json` can name."""
from typing import Callable

import tensorflow as tf


def gelu(x: tf.Tensor) -> tf.Tensor:
    """GELU, tanh approximation: what the final original code computes for `"gelu"`.

    `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`, written as `tf.nn.gelu`, whose graph
    TensorFlow fuses into a preceding matmul + bias on CPU (oneDNN).
    """
    return tf.nn.gelu(x, approximate=True)


def gelu_exact(x: tf.Tensor) -> tf.Tensor:
    """GELU with the exact Gaussian CDF `0.5 x (1 + erf(x / sqrt(2)))` (the 2018 release code;
    Hugging Face's `"gelu"`), written as the fusable `tf.nn.gelu`."""
    return tf.nn.gelu(x, approximate=False)


_SQRT_2_OVER_PI = 0.7978845608028654
_SQRT_HALF = 0.7071067811865476
_INV_SQRT_2PI = 0.3989422804014327


# The training forms keep only their input for the backward pass, which recomputes what it needs
# from it (as PyTorch's GELU does): one [B*T, intermediate_size] tensor a layer instead of two.


def _tanh_argument(x: tf.Tensor) -> tf.Tensor:
    return _SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)


@tf.custom_gradient
def _gelu_tanh_for_training(x: tf.Tensor):
    """`gelu` with its derivative written out: six elementwise passes back instead of autodiff's
    fourteen over the graph of `tf.nn.gelu`."""
    y = 0.5 * x * (1.0 + tf.tanh(_tanh_argument(x)))

    def grad(dy):
        # d/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) du/dx,  du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2)
        t = tf.tanh(_tanh_argument(x))
        du = _SQRT_2_OVER_PI * (1.0 + 0.134145 * x * x)
        return dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du)
    return y, grad


def _normal_cdf(x: tf.Tensor) -> tf.Tensor:
    return 0.5 * (1.0 + tf.math.erf(x * _SQRT_HALF))


@tf.custom_gradient
def _gelu_erf_for_training(x: tf.Tensor):
    """`gelu_exact` with its derivative written out (`Phi(x) + x phi(x)`), through `erf`, which
    TensorFlow vectorises on CPU, rather than the `erfc` of `tf.nn.gelu`."""
    def grad(dy):
        return dy * (_normal_cdf(x) + x * (_INV_SQRT_2PI * tf.exp(-0.5 * x * x)))
    return x * _normal_cdf(x), grad


ACTIVATIONS: dict[str, Callable[[tf.Tensor], tf.Tensor]] = {
    "gelu": gelu,
    "gelu_exact": gelu_exact,
    "relu": tf.nn.relu,
    "tanh": tf.tanh,
    "linear": tf.identity,
}


# The same functions for training: the derivative written out. TensorFlow's autodiff of
# `tf.nn.gelu` made GELU the costliest part of a fine-tuning step on CPU (a third of it for a
# 6-layer H=384 model); inference keeps `tf.nn.gelu`, which oneDNN fuses into the matmul.
_TRAINING_ACTIVATIONS = {"gelu": _gelu_tanh_for_training, "gelu_exact": _gelu_erf_for_training}


def get_activation(name: str, training: bool = False) -> Callable[[tf.Tensor], tf.Tensor]:
    """Maps a `hidden_act` value (case-insensitive) to its function (`training`: the one whose
    gradient is cheapest; same values)."""
    key = name.lower() if isinstance(name, str) else name
    if key not in ACTIVATIONS:
        raise ValueError(f"unknown hidden_act {name!r}; valid values: {', '.join(ACTIVATIONS)}")
    return _TRAINING_ACTIVATIONS.get(key, ACTIVATIONS[key]) if training else ACTIVATIONS[key]
