"""`BertEmbeddings`: word + segment + position embeddings, LayerNorm, dropout (paper section 3.2)."""
import keras
import tensorflow as tf

from modeling.layers.dropout import Dropout
from modeling.layers.initializers import weight_initializer
from modeling.layers.layer_norm import LayerNorm
from modeling.layers import packing


class BertEmbeddings(keras.layers.Layer):
    """Sums the word, segment ("token type") and absolute position embeddings of each token.

    As the original `embedding_lookup` + `embedding_postprocessor`: the word-embedding table is the one
    the masked-LM head reuses as its output projection; positions are the first T rows of a learned
    table; LayerNorm (epsilon 1e-12) then dropout. Given the batch's packing, it embeds the real
    tokens only, each with the position of its column.
    """

    def __init__(self, vocab_size: int, hidden_size: int, type_vocab_size: int,
                 max_position_embeddings: int, dropout_rate: float, initializer_range: float,
                 **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.type_vocab_size = type_vocab_size
        self.max_position_embeddings = max_position_embeddings
        self.dropout_rate = dropout_rate
        self.initializer_range = initializer_range
        self.layer_norm = LayerNorm(epsilon=1e-12, name="layer_norm", dtype=self.dtype_policy)
        self.dropout = Dropout(dropout_rate, name="dropout", dtype=self.dtype_policy)

    def build(self, input_shape):
        init = weight_initializer(self.initializer_range)
        self.word_embeddings = self.add_weight(
            name="word_embeddings", shape=(self.vocab_size, self.hidden_size), initializer=init)
        self.token_type_embeddings = self.add_weight(
            name="token_type_embeddings", shape=(self.type_vocab_size, self.hidden_size),
            initializer=init)
        self.position_embeddings = self.add_weight(
            name="position_embeddings", shape=(self.max_position_embeddings, self.hidden_size),
            initializer=init)
        self.layer_norm.build((None, None, self.hidden_size))

    def call(self, input_ids, segment_ids, token_index=None, training=None):
        """Embeds a batch of token ids.

        Args:
            input_ids: int32 [B, T] WordPiece ids.
            segment_ids: int32 [B, T] sentence A (0) / B (1) ids.
            token_index: int32 [R], the batch's packing (`modeling.layers.packing.pack`), or None.

        Returns:
            float [B, T, H] embedding output (after LayerNorm and dropout); with `token_index`,
            the packed rows [R, H] (the real tokens) only.
        """
        length = tf.shape(input_ids)[1]
        if token_index is not None:
            input_ids = packing.gather_tokens(input_ids, token_index)              # [R]
            segment_ids = packing.gather_tokens(segment_ids, token_index)          # [R]
        words = tf.gather(self.word_embeddings, input_ids)                     # [B, T, H] or [R, H]
        segments = tf.gather(self.token_type_embeddings, segment_ids)          # [B, T, H] or [R, H]
        positions = self.position_embeddings[:length]                          # [T, H]
        if token_index is None:
            positions = positions[tf.newaxis]                                  # [1, T, H]
        else:
            # Gathered from the [T, H] slice, whose gradient is dense as the padded one's (the
            # global norm gradients are clipped to sums IndexedSlices' rows, repeats and all),
            # and after the two lookups: grappler sums equal-shaped terms as one AddN whose
            # inputs it sorts by name, i.e. in the order they were made, so that the packed
            # sum rounds as the padded (words + segments) + positions.
            positions = tf.gather(positions, token_index % length)            # [R, H]
        output = tf.cast(words + segments + positions, self.compute_dtype)
        return self.dropout(self.layer_norm(output), training=training)

    def compute_output_spec(self, input_ids, segment_ids, token_index=None, training=None):
        """[B, T, H], or [R, H] packed, without tracing `call` (a functional model's build)."""
        rows = input_ids.shape if token_index is None else token_index.shape
        return keras.KerasTensor((*rows, self.hidden_size), dtype=self.compute_dtype)

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size,
                "hidden_size": self.hidden_size, "type_vocab_size": self.type_vocab_size,
                "max_position_embeddings": self.max_position_embeddings,
                "dropout_rate": self.dropout_rate, "initializer_range": self.initializer_range}
