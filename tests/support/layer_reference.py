"""NumPy references and weights for the layer tests."""
import math

import numpy as np

from modeling.layers.attention import SelfAttention


def reference_attention(layer: SelfAttention, hidden_states: np.ndarray,
                        input_mask: np.ndarray) -> np.ndarray:
    """softmax(Q K^T / sqrt(D) + mask) V per head, heads concatenated, in float64 NumPy."""
    batch, length, _ = hidden_states.shape
    heads, size = layer.num_heads, layer.head_size

    def project(dense):
        kernel, bias = (np.asarray(w, np.float64) for w in dense.get_weights())
        x = hidden_states.astype(np.float64) @ kernel + bias                  # [B, T, N*D]
        return x.reshape(batch, length, heads, size).transpose(0, 2, 1, 3)  # [B, N, T, D]

    query, key, value = project(layer.query), project(layer.key), project(layer.value)
    scores = query @ key.transpose(0, 1, 3, 2) / math.sqrt(size)
    scores = scores + (1.0 - input_mask[:, None, None, :]) * -10000.0
    scores -= scores.max(-1, keepdims=True)
    probs = np.exp(scores) / np.exp(scores).sum(-1, keepdims=True)
    context = (probs @ value).transpose(0, 2, 1, 3)                          # [B, T, N, D]
    return context.reshape(batch, length, heads * size)


def randomize(layer, seed: int, scale: float = 0.5) -> None:
    """Gives every weight of `layer` random normal values (biases too), so that no term vanishes."""
    rng = np.random.default_rng(seed)
    layer.set_weights([rng.normal(0.0, scale, w.shape).astype(np.float32)
                       for w in layer.get_weights()])
