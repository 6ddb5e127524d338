"""Fine-tuning models: the encoder plus one small head each (paper section 4)."""
import keras
import tensorflow as tf

from modeling.config import BertConfig
from modeling.layers.output_heads import OutputProjection
from modeling.layers import packing
from modeling.models.encoder import BertEncoder
from utils.encoder_inputs import ENCODER_INPUTS


class _TaskModel(keras.Model):
    """Shared wiring: an encoder (`packed` unless given one, see `BertEncoder`), a head built at
    construction, config round trip."""

    def __init__(self, config: BertConfig, head: keras.layers.Layer,
                 encoder: BertEncoder | None, packed: bool = True, **kwargs):
        super().__init__(**kwargs)
        self.config = config
        self.encoder = encoder or BertEncoder(config, packed=packed)
        self.head = head
        # Built here, outside any call scope, so that variable paths start at the head's name.
        self.head.build(None)

    def encode(self, inputs, training):
        return self.encoder({k: inputs[k] for k in ENCODER_INPUTS}, training=training)

    def outputs_of(self, encoder_outputs: dict, training=None) -> dict:
        """The head's outputs from the encoder's (`BertEncoder.call`), e.g. where the caller
        also reads its hidden states (`modeling.models.distillation`)."""
        raise NotImplementedError


class BertClassifier(_TaskModel):
    """Sentence (pair) classification or regression on the pooled output (GLUE, XNLI).

    As the original `run_classifier.create_model`: dropout 0.1 on the pooled output in training, then
    `output_weights` [num_labels, H] and `output_bias` at the checkpoint's root scope. Output
    `logits` float32 [B, num_labels] (one column for regression).
    """

    def __init__(self, config: BertConfig, num_labels: int, encoder: BertEncoder | None = None,
                 **kwargs):
        head = OutputProjection(num_labels, config.hidden_size, config.initializer_range,
                                name="classifier")
        super().__init__(config, head, encoder, **{"name": "bert_classifier", **kwargs})
        self.num_labels = num_labels
        self.dropout = keras.layers.Dropout(0.1, name="classifier_dropout")

    def call(self, inputs, training=None):
        pooled_output = self.encoder.pooled_output(inputs, training=training)
        return self.outputs_of({"pooled_output": pooled_output}, training)

    def outputs_of(self, encoder_outputs, training=None):
        pooled_output = encoder_outputs["pooled_output"]
        return {"logits": self.head(self.dropout(pooled_output, training=training))}


class BertSpanLabeler(_TaskModel):
    """Start/end span scores over the sequence (SQuAD), as the original `run_squad.create_model`.

    `cls/squad/output_weights` [2, H] and `output_bias` [2]; outputs `start_logits` and
    `end_logits`, float32 [B, T]. Its encoder computes every position unless `packed=True`: the
    original's span loss is a softmax over every position, padding included, and its n-best
    takes padding's logits (`training.fine_tuning.predict_spans`).
    """

    def __init__(self, config: BertConfig, encoder: BertEncoder | None = None,
                 packed: bool = False, **kwargs):
        head = OutputProjection(2, config.hidden_size, config.initializer_range, name="squad")
        super().__init__(config, head, encoder, packed,
                         **{"name": "bert_span_labeler", **kwargs})

    def call(self, inputs, training=None):
        return self.outputs_of(self.encode(inputs, training), training)

    def outputs_of(self, encoder_outputs, training=None):
        logits = self.head(encoder_outputs["sequence_output"])                # [B, T, 2]
        return {"start_logits": logits[..., 0], "end_logits": logits[..., 1]}


class BertMultipleChoice(_TaskModel):
    """Multiple choice (SWAG): one vector scores each choice's pooled output; softmax over choices.

    Inputs are [B, C, T]; output `logits` float32 [B, C]. The vector is the only new parameter
    (no bias), as the paper describes.
    """

    def __init__(self, config: BertConfig, encoder: BertEncoder | None = None, **kwargs):
        head = OutputProjection(1, config.hidden_size, config.initializer_range, use_bias=False,
                                name="multiple_choice")
        super().__init__(config, head, encoder, **{"name": "bert_multiple_choice", **kwargs})
        self.dropout = keras.layers.Dropout(config.hidden_dropout_prob, name="choice_dropout")

    def call(self, inputs, training=None):
        num_choices = tf.shape(inputs["input_ids"])[1]
        flat = {k: tf.reshape(inputs[k], [-1, tf.shape(inputs[k])[-1]]) for k in ENCODER_INPUTS}
        pooled_output = self.encoder.pooled_output(flat, training=training)   # [B*C, H]
        scores = self.head(self.dropout(pooled_output, training=training))     # [B*C, 1]
        return {"logits": tf.reshape(scores, [-1, num_choices])}


class BertTokenClassifier(_TaskModel):
    """Per-token tagging (CoNLL-2003 NER) on the last layer; output `logits` float32 [B, T, K].

    With `labelled_pieces_only`, in training, given `label_ids` int [B, T] (-1 for the pieces
    that carry no label: sub-word pieces, `--document_context`'s context, padding), the last
    layer and the head compute the labelled pieces only (`BertEncoder.sequence_output_at`), laid
    out [B, Q], Q the most labelled pieces of a row, and the logits of the others are 0: the loss
    reads the labelled pieces alone. That saves work where few pieces carry a label (a sentence
    amid its document's context); where most do and rows differ in length, B x Q is more than
    the batch's packed pieces. Under XLA, whose shapes are static, every piece.
    """

    def __init__(self, config: BertConfig, num_labels: int, encoder: BertEncoder | None = None,
                 labelled_pieces_only: bool = False, **kwargs):
        head = OutputProjection(num_labels, config.hidden_size, config.initializer_range,
                                name="token_classifier")
        super().__init__(config, head, encoder, **{"name": "bert_token_classifier", **kwargs})
        self.num_labels = num_labels
        self.labelled_pieces_only = labelled_pieces_only
        self.dropout = keras.layers.Dropout(config.hidden_dropout_prob, name="token_dropout")

    def call(self, inputs, training=None):
        label_ids = inputs.get("label_ids") if training and self.labelled_pieces_only else None
        if label_ids is None or not self.encoder.packed or packing.compiled_with_xla():
            return self.outputs_of(self.encode(inputs, training), training)
        labelled = tf.cast(label_ids, tf.int32) >= 0                          # [B, T]
        where = tf.where(labelled)                                            # [L, 2]: b, t
        rank = tf.gather_nd(tf.cumsum(tf.cast(labelled, tf.int64), axis=1, exclusive=True),
                            where)                                            # [L]
        slots = tf.stack([where[:, 0], rank], axis=1)                         # [L, 2]: b, q
        shape = tf.shape(label_ids, out_type=tf.int64)
        width = tf.reduce_max(tf.concat([rank + 1, [1]], 0))                  # Q, at least 1
        positions = tf.scatter_nd(slots, tf.cast(where[:, 1], tf.int32),
                                  tf.stack([shape[0], width]))                # [B, Q]
        states = self.encoder.sequence_output_at(inputs, positions, training)  # [B, Q, H]
        logits = self.head(self.dropout(states, training=training))           # [B, Q, K]
        return {"logits": tf.scatter_nd(where, tf.gather_nd(logits, slots),
                                        tf.concat([shape, [self.num_labels]], 0))}

    def outputs_of(self, encoder_outputs, training=None):
        sequence_output = encoder_outputs["sequence_output"]
        return {"logits": self.head(self.dropout(sequence_output, training=training))}
