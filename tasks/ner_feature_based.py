"""Named-entity recognition on frozen BERT features (paper section 5.3's feature-based approach).

The concatenated activations of some encoder layers at each word's first piece, computed once and
cached (`data.ner.feature_cache`), feed a two-layer BiLSTM and a classifier
(`modeling.models.bilstm_tagger`), which alone are trained. The sequences, labels and evaluation
files are the fine-tuned tagger's (`tasks.ner`, which runs this mode for
`run_ner.py --feature_based`).
"""
from __future__ import annotations

import dataclasses
import os
from typing import Sequence

from absl import logging
import numpy as np
import tensorflow as tf

from data.feature_extraction import parse_layer_indexes
from data.ner import feature_cache, features as ner_features
from modeling import checkpoints, losses
from modeling.config import BertConfig
from modeling.models.bilstm_tagger import BiLstmTagger
from modeling.models.encoder import BertEncoder
from running.batching import ArrayExamples, Batching, HostExamples
from running import prediction
from training import fine_tuning
from training.trainer import LossFn
from utils.encoder_inputs import ENCODER_INPUTS


@dataclasses.dataclass(frozen=True)
class FrozenFeatures:
    """Where the features come from and what their cache is keyed on.

    Attributes:
        config: the encoder's config.
        init_checkpoint: the encoder to extract from (--init_checkpoint).
        feature_layers: the encoder layers concatenated, `"-1,-2,-3,-4"` (-1 is the last).
        vocab_file, do_lower_case: the tokenizer's.
        cache_dir: where the features are cached.
        dtype: the dtype policy they are computed in.
        batch_size, batching: how the encoder is run over the sequences.
    """

    config: BertConfig
    init_checkpoint: str | None
    feature_layers: str
    vocab_file: str
    cache_dir: str
    do_lower_case: bool
    dtype: str
    batch_size: int
    batching: Batching = Batching()

    def check(self) -> None:
        """Raises ValueError without an encoder to extract from, or for layers the model lacks."""
        if not self.init_checkpoint:
            raise ValueError("--feature_based needs --init_checkpoint (the encoder to extract "
                             "from)")
        if not self.layers:
            raise ValueError(f"--feature_layers={self.feature_layers} names no layer")

    @property
    def layers(self) -> tuple[int, ...]:
        try:
            return tuple(parse_layer_indexes(self.feature_layers, self.config.num_hidden_layers))
        except ValueError as error:
            raise ValueError(f"--feature_layers={self.feature_layers}: {error}") from None


def frozen_encoder(config: BertConfig, init_checkpoint: str) -> BertEncoder:
    encoder = BertEncoder(config)
    found = checkpoints.load_checkpoint(encoder, init_checkpoint)
    logging.info("frozen encoder loaded from %s (%s)", init_checkpoint, found)
    return encoder


def fine_tuning_task(config: BertConfig, num_labels: int, frozen: FrozenFeatures,
                     lstm_units: int, loss_fn: LossFn) -> fine_tuning.FineTuningTask:
    """The BiLSTM tagger over frozen features: it starts from random values (nothing pretrained
    to load) and is kept in the training checkpoints; `model.ckpt` is the frozen encoder."""
    def save(trained: fine_tuning.Trained, output_dir: str) -> None:
        checkpoints.save_tf1_checkpoint(frozen_encoder(config, frozen.init_checkpoint),
                                        os.path.join(output_dir, "model.ckpt"),
                                        global_step=trained.global_step,
                                        update_state_file=False)
        config.to_json_file(os.path.join(output_dir, "bert_config.json"))
    return fine_tuning.FineTuningTask(
        lambda: BiLstmTagger(len(frozen.layers) * config.hidden_size, num_labels,
                             lstm_units=lstm_units),
        loss_fn, head="the BiLSTM tagger trained there", initialise=None, save=save)


def word_features(path: str, found: ner_features.NerFeatures, frozen: FrozenFeatures,
                  sequences: dict) -> feature_cache.WordFeatures:
    """The features of every word of the split in `path`, from the cache when it has them.

    `sequences`: how the file's sentences became `found` (tag scheme, sequence length, document
    context), part of the cache's key."""
    parts = {"checkpoint": feature_cache.file_digest(
                 checkpoints.resolve_checkpoint_prefix(frozen.init_checkpoint) + ".index"),
             "bert_config": frozen.config.to_dict(), "vocab": feature_cache.file_digest(frozen.vocab_file),
             "data": feature_cache.file_digest(path), "do_lower_case": frozen.do_lower_case,
             **sequences, "layers": list(frozen.layers), "dtype": frozen.dtype}

    def encode():
        def chosen_layers(outputs, batch):
            return {"features": tf.cast(tf.concat(
                [outputs["encoder_outputs"][i] for i in frozen.layers], axis=-1), tf.float32)}
        for outputs in prediction.predict_batches(
                frozen_encoder(frozen.config, frozen.init_checkpoint),
                ArrayExamples(found.to_arrays(), ENCODER_INPUTS, frozen.batching),
                frozen.batch_size, chosen_layers):
            yield outputs["features"]

    return feature_cache.cached_word_features(
        frozen.cache_dir, feature_cache.cache_key(parts), {**parts, "data_file": path}, encode,
        found.word_positions, len(frozen.layers) * frozen.config.hidden_size)


def word_labels(found: ner_features.NerFeatures) -> np.ndarray:
    """int32 [num_words] each word's label id, -1 for a word without a piece in its sequence."""
    rows = [np.where(positions >= 0, labels[np.maximum(positions, 0)], -1)
            for labels, positions in zip(found.label_ids, found.word_positions)]
    return np.concatenate(rows).astype(np.int32) if rows else np.zeros(0, np.int32)


def word_examples(words: feature_cache.WordFeatures,
                  labels: np.ndarray | None = None) -> HostExamples:
    """Sentences of word features, each batch padded to its longest sentence."""
    return HostExamples(words.num_sentences, lambda rows: words.batch(rows, labels),
                        words.batch_signature(labels is not None))


def tag(tagger: BiLstmTagger, words: feature_cache.WordFeatures,
        found: ner_features.NerFeatures, labels: Sequence[str],
        batch_size: int) -> tuple[list[list[str]], float]:
    """As `tasks.ner.tag`, from the split's word features."""
    logits = prediction.predict(                                              # [words, K]
        tagger, word_examples(words), batch_size,
        lambda outputs, batch: {"logits": tf.boolean_mask(outputs["logits"],
                                                          batch["word_mask"] > 0)})["logits"]
    loss = float(losses.token_cross_entropy(logits[None], word_labels(found)[None]))
    # Each word's prediction goes to its first piece, where predicted_word_tags reads it.
    predicted = np.zeros_like(found.input_ids)
    for row, positions in enumerate(found.word_positions):
        kept = positions >= 0
        word_ids = np.argmax(logits[words.offsets[row]:words.offsets[row + 1]], -1)
        predicted[row, positions[kept]] = word_ids[kept]
    return ner_features.predicted_word_tags(found, predicted, labels), loss
