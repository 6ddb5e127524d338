"""The feed-forward activations a `bert_config.json` can name."""
import math
from typing import Callable

import tensorflow as tf


def gelu(x: tf.Tensor) -> tf.Tensor:
    """GELU, tanh approximation: what the final original code computes for `"gelu"`."""
    cdf = 0.5 * (1.0 + tf.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * tf.pow(x, 3))))
    return x * cdf


def gelu_exact(x: tf.Tensor) -> tf.Tensor:
    """GELU with the exact Gaussian CDF (the 2018 release code; Hugging Face's `"gelu"`)."""
    cdf = 0.5 * (1.0 + tf.math.erf(x / tf.cast(math.sqrt(2.0), x.dtype)))
    return x * cdf


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
