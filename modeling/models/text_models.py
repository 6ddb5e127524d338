"""Models that put a BERT to work on new text: sentence vectors and masked-token predictions.

Both wrap a model the project already builds (an encoder, a pretrainer) and output only
per-example values, so that they run on batches of any length and export as serving signatures.
"""
from __future__ import annotations

import keras
import tensorflow as tf

from utils.encoder_inputs import ENCODER_INPUTS, INPUT_MASK

# How a sentence vector is made from the encoder's outputs:
#   cls: the last layer at [CLS]; pooler: the pooler output (tanh(dense([CLS])), what the
#   classifier reads); mean / max: over the real tokens ([CLS] and [SEP] included), as
#   sentence-transformers' Pooling module.
POOLINGS = ("cls", "pooler", "mean", "max")


def pool(sequence_output: tf.Tensor, pooled_output: tf.Tensor, input_mask: tf.Tensor,
         pooling: str) -> tf.Tensor:
    """float32 [B, H]: one vector per example, pooled as `pooling` (one of POOLINGS)."""
    sequence_output = tf.cast(sequence_output, tf.float32)
    if pooling == "cls":
        return sequence_output[:, 0]
    if pooling == "pooler":
        return tf.cast(pooled_output, tf.float32)
    # expand_dims rather than [..., tf.newaxis]: LiteRT runs it (modeling/layers/attention.py).
    mask = tf.expand_dims(tf.cast(input_mask, tf.float32), -1)         # [B, T, 1]
    if pooling == "mean":
        # sentence-transformers: sum over real tokens / max(count, 1e-9).
        return tf.reduce_sum(sequence_output * mask, 1) / tf.maximum(tf.reduce_sum(mask, 1), 1e-9)
    if pooling == "max":
        # sentence-transformers: padding set to -1e9 before the max.
        return tf.reduce_max(tf.where(mask > 0, sequence_output, -1e9), 1)
    raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, got {pooling!r}")


class SentenceEncoder(keras.Model):
    """An encoder's sentence vectors: output `embedding` float32 [B, H], optionally L2-normalised
    (x / max(|x|, 1e-12), as sentence-transformers' Normalize)."""

    def __init__(self, encoder: keras.Model, pooling: str = "cls", normalize: bool = False,
                 **kwargs):
        super().__init__(**{"name": "sentence_encoder", **kwargs})
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, got {pooling!r}")
        self.encoder = encoder
        self.config = getattr(encoder, "config", None)
        self.pooling = pooling
        self.normalize = normalize

    def call(self, inputs, training=None):
        outputs = self.encoder({k: inputs[k] for k in ENCODER_INPUTS}, training=training)
        vectors = pool(outputs["sequence_output"], outputs["pooled_output"], inputs[INPUT_MASK],
                       self.pooling)
        if self.normalize:
            vectors = vectors / tf.maximum(tf.norm(vectors, axis=-1, keepdims=True), 1e-12)
        return {"embedding": vectors}


class MaskedTokenPredictor(keras.Model):
    """A pretrainer's masked-LM head at given positions, as its top-k tokens.

    Inputs: the encoder's inputs and `masked_lm_positions` int32 [B, P]. Outputs `token_ids`
    int32 [B, P, k] and `probabilities` float32 [B, P, k] (softmax over the vocabulary), most
    probable first.
    """

    def __init__(self, pretrainer: keras.Model, top_k: int = 5, **kwargs):
        super().__init__(**{"name": "masked_token_predictor", **kwargs})
        if not 1 <= top_k <= pretrainer.config.vocab_size:
            raise ValueError(f"top_k={top_k} must be in [1, vocab_size="
                             f"{pretrainer.config.vocab_size}]")
        self.pretrainer = pretrainer
        self.config = pretrainer.config
        self.top_k = top_k
        # No weights of its own: the pretrainer's layers build themselves when first called.
        self.built = True

    def call(self, inputs, training=None):
        encoder = self.pretrainer.encoder
        states = encoder.sequence_output_at(inputs, inputs["masked_lm_positions"],
                                            training=training)                 # [B, P, H]
        logits = self.pretrainer.masked_lm(states, None, encoder.word_embeddings)
        probabilities = tf.nn.softmax(tf.cast(logits, tf.float32), axis=-1)
        top = tf.math.top_k(probabilities, k=self.top_k)
        return {"token_ids": top.indices, "probabilities": top.values}
