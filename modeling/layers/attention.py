"""`SelfAttention`: multi-head scaled dot-product self-attention (paper section 3; Vaswani et al.)."""
import math

import keras
import tensorflow as tf

from modeling.layers.dropout import Dropout
from modeling.layers.initializers import weight_initializer
from modeling.layers import packing

# Shapes: B batch, T sequence length (from = to = T in self-attention), N heads, D head size,
# H = N * D hidden size, R packed rows (the batch's real tokens, `modeling.layers.packing`).


class SelfAttention(keras.layers.Layer):
    """Query/key/value projections, softmax(Q K^T / sqrt(D) + attention_mask) V, heads concatenated.

    As the original `attention_layer`: the mask is additive, -10000 on padding, added to the scaled
    scores before the softmax; dropout on the attention probabilities. The output projection belongs
    to the enclosing Transformer layer, as in the original.

    The projections run on [B*T, H] matrices (as the original, which flattens to 2D), so that on
    CPU each becomes one oneDNN matmul with its bias fused. The scores are computed as
    `matmul(Q, K^T) * scale + attention_mask`, the form TensorFlow fuses into one batched matmul,
    and in the compute dtype: under mixed bfloat16 the softmax input stays bfloat16 (the mask
    rounds to -9984, whose exponential is 0 all the same), with no float32 copies of the
    [B, N, T, T] scores. Heads and positions swap places by `_swap_axes_1_2`.

    Given packed rows (the batch's real tokens), the projections run on those rows only, as one
    product with the three kernels side by side, and their outputs are scattered into groups of
    sequences of like length, each [rows, length, 3H] (zeros at padding, which the mask hides),
    for the per-sequence products; the context vectors of the real tokens are gathered back.
    """

    def __init__(self, num_heads: int, head_size: int, dropout_rate: float,
                 initializer_range: float, **kwargs):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.head_size = head_size
        self.dropout_rate = dropout_rate
        self.initializer_range = initializer_range
        width = num_heads * head_size
        dense = dict(kernel_initializer=weight_initializer(initializer_range),
                     dtype=self.dtype_policy)
        self.query = keras.layers.Dense(width, name="query", **dense)
        self.key = keras.layers.Dense(width, name="key", **dense)
        self.value = keras.layers.Dense(width, name="value", **dense)
        self.dropout = Dropout(dropout_rate, name="dropout", dtype=self.dtype_policy)

    def build(self, input_shape):
        for projection in (self.query, self.key, self.value):
            projection.build((None, input_shape[-1]))

    def _heads(self, x, batch, length):
        """[B*T, H] rows, in the order of a [B, T] batch, -> [B, N, T, D]."""
        x = tf.reshape(x, [batch, length, self.num_heads, self.head_size])  # [B, T, N, D]
        return _swap_axes_1_2(x)                                           # [B, N, T, D]

    def _scores(self, query, key, attention_mask):
        """Scaled, masked scores [B, N, T, T] of query, key [B, N, T, D] under the additive
        attention_mask [B, 1, 1, T]."""
        scores = tf.matmul(query, key, transpose_b=True) * (1.0 / math.sqrt(self.head_size))
        return scores + tf.cast(attention_mask, scores.dtype)

    def _context(self, probs, value):
        """The context vectors [B*T, H] of probs [B, N, T, T] over value [B, N, T, D]."""
        context = _swap_axes_1_2(tf.matmul(probs, value))              # [B, T, N, D]
        return tf.reshape(context, [-1, self.num_heads * self.head_size])

    def _attend(self, query, key, value, attention_mask, training):
        """The context vectors [B*T, H] of query, key, value [B, N, T, D] under the additive
        attention_mask [B, 1, 1, T]."""
        scores = self._scores(query, key, attention_mask)
        probs = self.dropout(tf.nn.softmax(scores, axis=-1), training=training)
        return self._context(probs, value)

    def call(self, hidden_states, attention_mask, layout=None, queries=None, training=None):
        """Attends every position (or the `queries`) to every unmasked position of its sequence.

        Args:
            hidden_states: float [B, T, H], or the batch's packed rows [R, H] (`layout`).
            attention_mask: float [B, 1, 1, T], 0 for real tokens and -10000 for padding.
            layout: for packed rows, the batch's packing: `token_index` int32 [R] and where
                attention places each row (`modeling.layers.packing.attention_layout`); None for
                [B, T, H] states.
            queries: with packed rows, float [B, Q, H]: the states of some positions of each
                sequence, the only ones attention is computed for (the keys and values are every
                real token's); None for all.

        Returns:
            float context vectors, heads concatenated: [B, T, H], [R, H] for packed rows, or
            [B*Q, H] for `queries`.
        """
        if queries is not None:
            return self._attend_from(queries, hidden_states, attention_mask,
                                     layout["token_index"], training)
        if layout is not None:
            return self._attend_packed(hidden_states, layout, training)
        batch, length = tf.shape(hidden_states)[0], tf.shape(hidden_states)[1]
        flat_states = tf.reshape(hidden_states, [-1, hidden_states.shape[-1]])   # [B*T, H]
        query, key, value = (self._heads(projection(flat_states), batch, length)
                             for projection in (self.query, self.key, self.value))
        context = self._attend(query, key, value, attention_mask, training)       # [B*T, H]
        return tf.reshape(context, [batch, length, self.num_heads * self.head_size])

    def probabilities(self, hidden_states, attention_mask):
        """The attention distributions of every head, float32 [B, N, T, T], without dropout:
        what MiniLM distils (`modeling.losses.attention_distribution_loss`).

        Args:
            hidden_states: float [B, T, H], the layer's input.
            attention_mask: float [B, 1, 1, T], 0 for real tokens and -10000 for padding.
        """
        batch, length = tf.shape(hidden_states)[0], tf.shape(hidden_states)[1]
        flat_states = tf.reshape(hidden_states, [-1, hidden_states.shape[-1]])   # [B*T, H]
        query, key = (self._heads(projection(flat_states), batch, length)
                      for projection in (self.query, self.key))                 # [B, N, T, D]
        scores = self._scores(query, key, attention_mask)
        return tf.nn.softmax(tf.cast(scores, tf.float32), axis=-1)

    def _attend_packed(self, rows, layout, training):
        """Packed rows [R, H] -> their context vectors [R, H], attention run per group of rows
        (`modeling.layers.packing.attention_layout`)."""
        shapes = [tf.stack([size, length, 3, self.num_heads, self.head_size])
                  for size, length in layout["group_shapes"]]               # G x [5]
        slots = packing.scatter_rows(self._query_key_value(rows), layout["slot_index"],
                                     layout["slot_count"])                  # [S, 3H]
        heads = [tf.unstack(tf.einsum("atcnd->cantd", tf.reshape(part, shape)), num=3)
                 for part, shape in zip(tf.split(slots, layout["group_slots"], num=len(shapes)),
                                        shapes)]                # G x 3 x [rows, N, T, D]
        scores = [self._scores(query, key, mask)
                  for (query, key, _), mask in zip(heads, layout["group_masks"])]
        probs = self.dropout.drop_each([tf.nn.softmax(s, axis=-1) for s in scores], training)
        contexts = [self._context(p, value) for p, (_, _, value) in zip(probs, heads)]
        return packing.gather_rows(tf.concat(contexts, 0), layout["slot_index"])  # [R, H]

    def _attend_from(self, queries, rows, attention_mask, token_index, training):
        """The context vectors [B*Q, H] of queries [B, Q, H] over the keys and values of the
        packed rows [R, H], scattered back into the batch's [B, T] positions (zeros at padding,
        which `attention_mask` [B, 1, 1, T] hides)."""
        batch, length = tf.shape(attention_mask)[0], tf.shape(attention_mask)[-1]
        key_value = packing.scatter_tokens(self._projections(rows, (self.key, self.value)),
                                           token_index, batch, length)      # [B, T, 2H]
        key_value = tf.reshape(key_value, [batch, length, 2, self.num_heads, self.head_size])
        key, value = tf.unstack(tf.einsum("btcnd->cbntd", key_value), num=2)   # [B, N, T, D]
        query = self.query(tf.reshape(queries, [-1, queries.shape[-1]]))        # [B*Q, H]
        query = self._heads(query, batch, tf.shape(queries)[1])                 # [B, N, Q, D]
        return self._attend(query, key, value, attention_mask, training)

    def _query_key_value(self, rows):
        """The three projections of rows [R, H] as one matmul: [R, 3H], query, key, value.

        One [H, 3H] product instead of three [H, H] ones: larger matrices for oneDNN, and one
        scatter into the groups, one transpose a group and one product for the rows' gradient
        where three were summed."""
        return self._projections(rows, (self.query, self.key, self.value))

    def _projections(self, rows, projections):
        """Dense `projections` of rows [R, H] side by side, as one matmul: [R, len * H]."""
        kernel = tf.concat([tf.convert_to_tensor(p.kernel) for p in projections], axis=1)
        bias = tf.concat([tf.convert_to_tensor(p.bias) for p in projections], axis=0)
        return tf.nn.bias_add(tf.matmul(rows, tf.cast(kernel, rows.dtype)),
                              tf.cast(bias, rows.dtype))

    def get_config(self):
        return {**super().get_config(), "num_heads": self.num_heads, "head_size": self.head_size,
                "dropout_rate": self.dropout_rate, "initializer_range": self.initializer_range}


def _swap_axes_1_2(x: tf.Tensor) -> tf.Tensor:
    """[B, T, N, D] <-> [B, N, T, D].

    Written as an einsum, which TensorFlow runs with Eigen's transpose: on CPU `tf.transpose`
    becomes oneDNN's reorder, 3-7x slower on the [1, T, N, D] tensors of a batch-1 call (about
    60 us against 10-30 us each) and no faster on large ones.
    """
    return tf.einsum("abcd->acbd", x)


def attention_mask_from_input_mask(input_mask: tf.Tensor) -> tf.Tensor:
    """Turns input_mask int [B, T] (1 = real token) into the additive float32 mask [B, 1, 1, T].

    The new axes come from `tf.expand_dims`, not `[:, tf.newaxis]` indexing, which LiteRT's
    converter keeps as a TensorFlow op on a tensor of two unknown dimensions (serving/litert.py).
    """
    input_mask = tf.expand_dims(tf.expand_dims(tf.cast(input_mask, tf.float32), 1), 1)
    return (1.0 - input_mask) * -10000.0


class AttentionMask(keras.layers.Layer):
    """Layer form of `attention_mask_from_input_mask`, for functional models."""

    def call(self, input_mask):
        return attention_mask_from_input_mask(input_mask)

    def compute_output_spec(self, input_mask):
        return keras.KerasTensor((input_mask.shape[0], 1, 1, input_mask.shape[1]),
                                 dtype="float32")
