"""Output heads: the masked-LM head and the transposed output projection of the original's heads."""
import keras
import tensorflow as tf

from modeling.layers.activations import get_activation
from modeling.layers.initializers import weight_initializer
from modeling.layers.layer_norm import LayerNorm


class OutputProjection(keras.layers.Layer):
    """logits = x @ output_weights^T + output_bias, with `output_weights` stored as [K, H].

    The layout of the original's next-sentence (`cls/seq_relationship`), classifier
    (`output_weights` at the root scope) and SQuAD (`cls/squad`) heads, which keep the weight matrix
    transposed. Logits are float32 whatever the dtype policy.
    """

    def __init__(self, num_outputs: int, hidden_size: int, initializer_range: float,
                 use_bias: bool = True, **kwargs):
        super().__init__(**kwargs)
        self.num_outputs = num_outputs
        self.hidden_size = hidden_size
        self.initializer_range = initializer_range
        self.use_bias = use_bias

    def build(self, input_shape):
        self.output_weights = self.add_weight(
            name="output_weights", shape=(self.num_outputs, self.hidden_size),
            initializer=weight_initializer(self.initializer_range))
        if self.use_bias:
            self.output_bias = self.add_weight(
                name="output_bias", shape=(self.num_outputs,), initializer="zeros")

    def call(self, inputs):
        """Maps float [..., H] to float32 logits [..., K]."""
        weights = tf.cast(self.output_weights, self.compute_dtype)
        logits = tf.cast(tf.matmul(inputs, weights, transpose_b=True), tf.float32)
        return logits + tf.cast(self.output_bias, tf.float32) if self.use_bias else logits

    def get_config(self):
        return {**super().get_config(), "num_outputs": self.num_outputs,
                "hidden_size": self.hidden_size, "initializer_range": self.initializer_range,
                "use_bias": self.use_bias}


class MaskedLMHead(keras.layers.Layer):
    """Predicts the original token at masked positions (paper section 3.1, task #1).

    As the original `get_masked_lm_output`: gather the masked positions, dense H -> H with
    `hidden_act`, LayerNorm, then a matmul with the word-embedding table (tied, passed in at call
    time) plus a per-token `output_bias` [V].
    """

    def __init__(self, vocab_size: int, hidden_size: int, hidden_act: str,
                 initializer_range: float, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.hidden_act = hidden_act
        self.initializer_range = initializer_range
        self.transform = keras.layers.Dense(
            hidden_size, activation=get_activation(hidden_act), name="transform",
            kernel_initializer=weight_initializer(initializer_range), dtype=self.dtype_policy)
        self.layer_norm = LayerNorm(epsilon=1e-12, name="layer_norm", dtype=self.dtype_policy)

    def build(self, input_shape):
        self.transform.build((None, self.hidden_size))
        self.layer_norm.build((None, self.hidden_size))
        self.output_bias = self.add_weight(name="output_bias", shape=(self.vocab_size,),
                                           initializer="zeros")

    def call(self, sequence_output, masked_lm_positions, embedding_table):
        """Scores every vocabulary entry at each masked position.

        Args:
            sequence_output: float [B, T, H] last encoder layer.
            masked_lm_positions: int32 [B, P] positions to predict (padding slots point at 0),
                or None where `sequence_output` holds those positions' states [B, P, H] only.
            embedding_table: float32 [V, H] the encoder's word embeddings.

        Returns:
            float32 [B, P, V] logits.
        """
        hidden = sequence_output                                                # [B, P, H]
        if masked_lm_positions is not None:
            hidden = tf.gather(sequence_output, masked_lm_positions, batch_dims=1)
        output_shape = tf.concat([tf.shape(hidden)[:2], [self.vocab_size]], 0)
        # One [B*P, H] x [H, V] matmul: its gradient for the table is one matmul too, where the
        # batched form would make a [B, V, H] product and sum it over B.
        hidden = tf.reshape(hidden, [-1, self.hidden_size])                     # [B*P, H]
        hidden = self.layer_norm(self.transform(hidden))
        table = tf.cast(embedding_table, self.compute_dtype)
        logits = tf.matmul(hidden, table, transpose_b=True)                     # [B*P, V]
        logits = tf.nn.bias_add(tf.cast(logits, tf.float32), tf.cast(self.output_bias, tf.float32))
        return tf.reshape(logits, output_shape)                                 # [B, P, V]

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size,
                "hidden_size": self.hidden_size, "hidden_act": self.hidden_act,
                "initializer_range": self.initializer_range}
