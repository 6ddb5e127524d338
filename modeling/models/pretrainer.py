"""`BertPretrainer`: the encoder with the masked-LM and next-sentence heads (paper section 3.1);
`BertMaskedLM`: the encoder with the masked-LM head alone, as the TF2-era releases carry it."""
import keras
import tensorflow as tf

from modeling.layers.output_heads import MaskedLMHead, OutputProjection
from modeling import losses
from modeling.config import BertConfig
from modeling.models.encoder import BertEncoder


class BertPretrainer(keras.Model):
    """Masked LM (tied to the word embeddings) plus next-sentence prediction on the pooled output.

    Inputs are the pretraining TFRecord keys: `input_ids`, `input_mask`, `segment_ids` int32 [B, T],
    `masked_lm_positions` int32 [B, P]. Outputs: `masked_lm_logits` float32 [B, P, V] and
    `next_sentence_logits` float32 [B, 2] (label 0 = IsNext); the encoder's own outputs are
    `encoder`'s. The encoder is `packed` unless one is given (`BertEncoder`): the masked
    positions are real tokens, and its last layer computes them and the first token only
    (`BertEncoder.sequence_output_at`).
    """

    # Whether the model has the next-sentence head (`BertMaskedLM` has not).
    with_next_sentence = True

    def __init__(self, config: BertConfig, encoder: BertEncoder | None = None,
                 packed: bool = True, **kwargs):
        super().__init__(**{"name": "bert_pretrainer", **kwargs})
        self.config = config
        self.encoder = encoder or BertEncoder(config, packed=packed)
        self.masked_lm = MaskedLMHead(config.vocab_size, config.hidden_size, config.hidden_act,
                                      config.initializer_range, name="masked_lm")
        # Built here, outside any call scope, so that variable paths start at the head's name.
        self.masked_lm.build(None)
        if self.with_next_sentence:
            self.next_sentence = OutputProjection(2, config.hidden_size,
                                                  config.initializer_range, name="next_sentence")
            self.next_sentence.build(None)

    def call(self, inputs, training=None):
        masked_lm_positions = tf.cast(inputs["masked_lm_positions"], tf.int32)     # [B, P]
        # The pooler's first token, then the masked positions.
        positions = tf.concat([tf.zeros_like(masked_lm_positions[:, :1]), masked_lm_positions], 1)
        states = self.encoder.sequence_output_at(inputs, positions, training=training)
        outputs = {"masked_lm_logits": self.masked_lm(states[:, 1:], None,
                                                      self.encoder.word_embeddings)}
        if self.with_next_sentence:
            outputs["next_sentence_logits"] = self.next_sentence(
                self.encoder.pooler(states[:, :1]))
        return outputs

    def get_config(self):
        return {"config": self.config.to_dict(), "packed": self.encoder.packed, "name": self.name}

    @classmethod
    def from_config(cls, config):
        return cls(BertConfig.from_dict(config["config"]), packed=config.get("packed", True),
                   name=config.get("name"))


class BertMaskedLM(BertPretrainer):
    """The encoder and the masked-LM head, without the next-sentence head: what Google's TF2
    converter writes for a pretrainer (`--converted_model=pretrainer`), and what is read of a
    Model Garden pretrainer whose next-sentence head has its own pooler. Outputs as
    `BertPretrainer`'s without `next_sentence_logits`."""

    with_next_sentence = False

    def __init__(self, config: BertConfig, encoder: BertEncoder | None = None,
                 packed: bool = True, **kwargs):
        super().__init__(config, encoder, packed, **{"name": "bert_masked_lm", **kwargs})


def pretraining_losses(outputs: dict, batch: dict, masked_lm_weight_sum=None,
                       global_batch_size=None, use_next_sentence_label: bool = True) -> dict:
    """The original's pretraining loss: masked-LM loss + next-sentence loss.

    Args:
        outputs: the pretrainer's outputs.
        batch: the TFRecord features (`masked_lm_ids`, `masked_lm_weights`,
            `next_sentence_labels` [B, 1] or [B]).
        masked_lm_weight_sum, global_batch_size: global normalisers under tf.distribute.
        use_next_sentence_label: False drops the next-sentence loss (the paper's "No NSP").

    Returns:
        dict with float32 scalars `loss`, `masked_lm_loss`, `next_sentence_loss`.
    """
    masked_lm_loss = losses.masked_lm_loss(
        outputs["masked_lm_logits"], batch["masked_lm_ids"], batch["masked_lm_weights"],
        masked_lm_weight_sum)
    labels = tf.reshape(batch["next_sentence_labels"], [-1])
    next_sentence_loss = losses.mean_cross_entropy(
        outputs["next_sentence_logits"], labels, global_batch_size)
    total = masked_lm_loss + next_sentence_loss if use_next_sentence_label else masked_lm_loss
    return {"loss": total, "masked_lm_loss": masked_lm_loss,
            "next_sentence_loss": next_sentence_loss}


def pretraining_metric_sums(outputs: dict, batch: dict) -> dict:
    """Per-batch sums for the original's eval metrics, as (value sum, weight sum) pairs.

    `masked_lm_accuracy` and `masked_lm_loss` are weighted by `masked_lm_weights` (padding slots
    count for nothing); `next_sentence_*` are plain means over the examples.
    """
    weights = tf.cast(batch["masked_lm_weights"], tf.float32)
    logits = outputs["masked_lm_logits"]
    mlm_correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32),
                                   tf.cast(batch["masked_lm_ids"], tf.int32)), tf.float32)
    mlm_loss = losses.per_example_cross_entropy(logits, batch["masked_lm_ids"])
    labels = tf.cast(tf.reshape(batch["next_sentence_labels"], [-1]), tf.int32)
    nsp_logits = outputs["next_sentence_logits"]
    nsp_correct = tf.cast(tf.equal(tf.argmax(nsp_logits, -1, output_type=tf.int32), labels),
                          tf.float32)
    nsp_loss = losses.per_example_cross_entropy(nsp_logits, labels)
    examples = tf.cast(tf.shape(labels)[0], tf.float32)
    return {
        "masked_lm_accuracy": (tf.reduce_sum(mlm_correct * weights), tf.reduce_sum(weights)),
        "masked_lm_loss": (tf.reduce_sum(mlm_loss * weights), tf.reduce_sum(weights)),
        "next_sentence_accuracy": (tf.reduce_sum(nsp_correct), examples),
        "next_sentence_loss": (tf.reduce_sum(nsp_loss), examples),
    }
