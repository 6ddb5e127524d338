"""`TransformerLayer`: one post-LayerNorm Transformer encoder block (paper section 3)."""
import keras
import tensorflow as tf

from modeling.layers.activations import get_activation
from modeling.layers.attention import SelfAttention
from modeling.layers.dropout import Dropout
from modeling.layers.initializers import weight_initializer
from modeling.layers.layer_norm import LayerNorm


class TransformerLayer(keras.layers.Layer):
    """Self-attention then feed-forward, each followed by dropout, a residual add and LayerNorm.

    As the original `transformer_model` loop body: post-LN (LayerNorm after the residual add),
    epsilon 1e-12, feed-forward `hidden_act` in the intermediate layer only. The dense layers run
    on [B*T, H] matrices, as the original's, so that on CPU each is one oneDNN matmul with its bias
    (and GELU) fused; given the batch's packing, on the [R, H] matrix of its real tokens instead.
    """

    def __init__(self, hidden_size: int, num_heads: int, intermediate_size: int, hidden_act: str,
                 hidden_dropout_prob: float, attention_probs_dropout_prob: float,
                 initializer_range: float, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.initializer_range = initializer_range
        policy = self.dtype_policy
        dense = dict(kernel_initializer=weight_initializer(initializer_range), dtype=policy)
        self.attention = SelfAttention(num_heads, hidden_size // num_heads,
                                       attention_probs_dropout_prob, initializer_range,
                                       name="attention", dtype=policy)
        self.attention_output = keras.layers.Dense(hidden_size, name="attention_output", **dense)
        self.attention_layer_norm = LayerNorm(epsilon=1e-12, name="attention_layer_norm",
                                              dtype=policy)
        # The activation is applied in `call`, where `training` picks its form.
        self.intermediate = keras.layers.Dense(intermediate_size, name="intermediate", **dense)
        get_activation(hidden_act)  # an unknown name fails here, at construction
        self.output_dense = keras.layers.Dense(hidden_size, name="output", **dense)
        self.output_layer_norm = LayerNorm(epsilon=1e-12, name="output_layer_norm", dtype=policy)
        self.dropout = Dropout(hidden_dropout_prob, name="dropout", dtype=policy)

    def build(self, input_shape):
        hidden_shape = (None, self.hidden_size)
        self.attention.build((None, None, self.hidden_size))
        self.attention_output.build(hidden_shape)
        self.attention_layer_norm.build(hidden_shape)
        self.intermediate.build(hidden_shape)
        self.output_dense.build((None, self.intermediate_size))
        self.output_layer_norm.build(hidden_shape)

    def call(self, hidden_states, attention_mask, layout=None, queries=None, training=None):
        """Runs one block.

        Args:
            hidden_states: float [B, T, H] output of the previous layer (or the embeddings), or
                the batch's packed rows [R, H] when `layout` is given.
            attention_mask: float32 [B, 1, 1, T] additive mask (0 real, -10000 padding).
            layout: the batch's packing (`modeling.layers.packing.TokenPacking`), or None.
            queries: with `layout`, float [B, Q, H]: the previous layer's outputs at the only
                positions of each sequence whose outputs are computed; None for all.

        Returns:
            float [B, T, H], [R, H] packed, or [B, Q, H] for `queries`.
        """
        if queries is not None:
            context = self.attention(hidden_states, attention_mask, layout, queries=queries,
                                     training=training)                            # [B*Q, H]
            residual = tf.reshape(queries, [-1, self.hidden_size])                  # [B*Q, H]
            return tf.reshape(self._after_attention(residual, context, training),
                              tf.shape(queries))
        if layout is not None:
            context = self.attention(hidden_states, attention_mask, layout,
                                     training=training)                            # [R, H]
            return self._after_attention(hidden_states, context, training)
        residual = tf.reshape(hidden_states, [-1, self.hidden_size])               # [B*T, H]
        context = self.attention(hidden_states, attention_mask, training=training)  # [B, T, H]
        layer_output = self._after_attention(
            residual, tf.reshape(context, [-1, self.hidden_size]), training)       # [B*T, H]
        return tf.reshape(layer_output, tf.shape(hidden_states))                  # [B, T, H]

    def compute_output_spec(self, hidden_states, attention_mask, layout=None, queries=None,
                            training=None):
        """The shape of `hidden_states` (of `queries` where given), without tracing `call` (a
        functional model's build)."""
        like = hidden_states if queries is None else queries
        return keras.KerasTensor(like.shape, dtype=self.compute_dtype)

    def _after_attention(self, residual, context, training):
        """The block past attention: residual, context float [M, H] -> [M, H] (M rows)."""
        x = self.attention_output(context)
        attention_output = self.attention_layer_norm(
            _residual_sum(self.dropout(x, training=training), residual))
        activation = get_activation(self.hidden_act, training=bool(training))
        x = activation(self.intermediate(attention_output))                        # [M, I]
        x = self.dropout(self.output_dense(x), training=training)
        return self.output_layer_norm(_residual_sum(x, attention_output))

    def get_config(self):
        return {**super().get_config(), "hidden_size": self.hidden_size,
                "num_heads": self.num_heads, "intermediate_size": self.intermediate_size,
                "hidden_act": self.hidden_act, "hidden_dropout_prob": self.hidden_dropout_prob,
                "attention_probs_dropout_prob": self.attention_probs_dropout_prob,
                "initializer_range": self.initializer_range}


def _residual_sum(x: tf.Tensor, residual: tf.Tensor) -> tf.Tensor:
    """x + residual, two tensors of one shape, as `tf.add_n`: the same sum, whose gradient
    passes the upstream one to both, where that of `+` (not knowing the [M, H] shapes equal
    when M is dynamic) adds a dozen shape and reduction ops to the backward graph."""
    return tf.add_n([x, residual])
