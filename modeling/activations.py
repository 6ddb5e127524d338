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


ACTIVATIONS: dict[str, Callable[[tf.Tensor], tf.Tensor]] = {
    "gelu": gelu,
    "gelu_exact": gelu_exact,
    "relu": tf.nn.relu,
    "tanh": tf.tanh,
    "linear": tf.identity,
}


def get_activation(name: str) -> Callable[[tf.Tensor], tf.Tensor]:
    """Maps a `hidden_act` value (case-insensitive) to its function."""
    key = name.lower() if isinstance(name, str) else name
    if key not in ACTIVATIONS:
        raise ValueError(f"unknown hidden_act {name!r}; valid values: {', '.join(ACTIVATIONS)}")
    return ACTIVATIONS[key]
