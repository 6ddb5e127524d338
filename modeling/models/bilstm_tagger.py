"""`BiLstmTagger`: the feature-based NER tagger of the BERT paper (section 5.3, Table 7).

BERT stays frozen; the activations of some of its layers (the paper's best: the concatenation of
the last four, 4H wide) at each word's first WordPiece feed a randomly initialised two-layer
bidirectional LSTM and a linear classifier over the tags.
"""
import keras
import tensorflow as tf

from modeling.layers.output_heads import OutputProjection


class BiLstmTagger(keras.Model):
    """Two-layer BiLSTM and a classifier over per-word feature vectors.

    Inputs (dict): `features` float [B, W, D] (D = `feature_size`, one vector per word) and
    `word_mask` int [B, W], 1 for real words and 0 for padding (padding must come last). Output:
    `logits` float32 [B, W, num_labels]. Each LSTM direction has `lstm_units` units (the paper's
    "768-dimensional BiLSTM"); dropout is applied to the input features and to each BiLSTM layer's
    output. The classifier is named as the fine-tuned tagger's (`token_classifier`,
    `output_weights` [num_labels, 2 * lstm_units] and `output_bias`).
    """

    def __init__(self, feature_size: int, num_labels: int, lstm_units: int = 768,
                 num_layers: int = 2, dropout_rate: float = 0.1,
                 initializer_range: float = 0.02, **kwargs):
        super().__init__(**{"name": "bilstm_tagger", **kwargs})
        self.feature_size = feature_size
        self.num_labels = num_labels
        self.lstm_units = lstm_units
        self.num_layers = num_layers
        self.dropout_rate = dropout_rate
        self.initializer_range = initializer_range
        self.dropout = keras.layers.Dropout(dropout_rate, name="dropout")
        # One attribute per layer (not a list), so that object-based checkpoints track them.
        for index in range(num_layers):
            setattr(self, f"bilstm_{index}", keras.layers.Bidirectional(
                keras.layers.LSTM(lstm_units, return_sequences=True, name="lstm"),
                name=f"bilstm_{index}"))
        self.classifier = OutputProjection(num_labels, 2 * lstm_units, initializer_range,
                                           name="token_classifier")
        # The classifier works position by position: padded positions pass through unharmed.
        self.classifier.supports_masking = True
        # Built here, outside any call scope, so that variable paths start at the layers' names
        # and a checkpoint restores into existing variables.
        width = feature_size
        for lstm in self._bilstms():
            lstm.build((None, None, width))
            width = 2 * lstm_units
        self.classifier.build((None, None, width))
        self.built = True

    def _bilstms(self) -> list[keras.layers.Bidirectional]:
        return [getattr(self, f"bilstm_{index}") for index in range(self.num_layers)]

    def call(self, inputs, training=None):
        word_mask = tf.cast(inputs["word_mask"], tf.bool)                       # [B, W]
        hidden = self.dropout(inputs["features"], training=training)            # [B, W, D]
        for lstm in self._bilstms():
            hidden = lstm(hidden, mask=word_mask, training=training)            # [B, W, 2U]
            hidden = self.dropout(hidden, training=training)
        return {"logits": self.classifier(hidden)}                              # [B, W, K]

    def get_config(self):
        return {"feature_size": self.feature_size, "num_labels": self.num_labels,
                "lstm_units": self.lstm_units, "num_layers": self.num_layers,
                "dropout_rate": self.dropout_rate, "initializer_range": self.initializer_range,
                "name": self.name}
