"""`BertEmbeddings`: word + segment + position embeddings, LayerNorm, dropout (paper section 3.2)."""
import keras
import tensorflow as tf

from modeling.initializers import weight_initializer
from modeling.layer_norm import LayerNorm


class BertEmbeddings(keras.layers.Layer):
    """Sums the word, segment ("token type") and absolute position embeddings of each token.

    As the original `embedding_lookup` + `embedding_postprocessor`: the word-embedding table is the one
    the masked-LM head reuses as its output projection; positions are the first T rows of a learned
    table; LayerNorm (epsilon 1e-12) then dropout.
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
        self.dropout = keras.layers.Dropout(dropout_rate, name="dropout", dtype=self.dtype_policy)

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

    def call(self, input_ids, segment_ids, training=None):
        """Embeds a batch of token ids.

        Args:
            input_ids: int32 [B, T] WordPiece ids.
            segment_ids: int32 [B, T] sentence A (0) / B (1) ids.

        Returns:
            float [B, T, H] embedding output (after LayerNorm and dropout).
        """
        seq_length = tf.shape(input_ids)[1]
        words = tf.gather(self.word_embeddings, input_ids)           # [B, T, H]
        segments = tf.gather(self.token_type_embeddings, segment_ids)  # [B, T, H]
        positions = self.position_embeddings[:seq_length]              # [T, H]
        output = tf.cast(words + segments + positions[tf.newaxis], self.compute_dtype)
        return self.dropout(self.layer_norm(output), training=training)

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size,
                "hidden_size": self.hidden_size, "type_vocab_size": self.type_vocab_size,
                "max_position_embeddings": self.max_position_embeddings,
                "dropout_rate": self.dropout_rate, "initializer_range": self.initializer_range}
