"""Per-word features of a frozen encoder, computed once and cached on disk (paper section 5.3).

A word's feature vector is the concatenation of chosen encoder layers' activations at its first
WordPiece (the last four layers give 4H values). A split's features are stored in a folder named
by a hash of everything that determines them (the caller passes those parts, see `cache_key`):
`features.npy` float32 [num_words, D], read memory-mapped, `offsets.npy` int64 [N + 1] (the words
of sentence i are rows offsets[i]:offsets[i + 1]) and `info.json`, written last, whose presence
marks a complete entry. Words without a piece inside their sequence get zero vectors.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
from typing import Callable, Mapping, Sequence

from absl import logging
import keras
import numpy as np
import tensorflow as tf

from modeling.checkpoints.tf1 import resolve_checkpoint_prefix
from utils.output_files import atomic_output_folder, write_text_atomically
from utils.progress import Progress

_FEATURES = "features.npy"
_OFFSETS = "offsets.npy"
_INFO = "info.json"


def file_digest(path: str | os.PathLike) -> str:
    """sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def checkpoint_digest(path: str) -> str:
    """sha256 of a checkpoint's `.index` file, which holds a checksum of every stored tensor."""
    return file_digest(resolve_checkpoint_prefix(path) + ".index")


def cache_key(parts: Mapping[str, object]) -> str:
    """A short hash of JSON-serialisable parts (checkpoint and data digests, layers, lengths...)."""
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:20]


@dataclasses.dataclass(frozen=True)
class WordFeatures:
    """A split's per-word features.

    Attributes:
        values: float32 [num_words, D], usually memory-mapped.
        offsets: int64 [N + 1], sentence i's words are rows offsets[i]:offsets[i + 1].
    """

    values: np.ndarray
    offsets: np.ndarray

    @property
    def num_sentences(self) -> int:
        return len(self.offsets) - 1

    @property
    def feature_size(self) -> int:
        return self.values.shape[1]

    @property
    def max_words(self) -> int:
        return int(np.max(np.diff(self.offsets))) if self.num_sentences else 0

    def batch(self, indices: Sequence[int], word_values: np.ndarray | None = None,
              num_words: int | None = None) -> dict[str, np.ndarray]:
        """Sentences `indices` as a zero-padded batch.

        Args:
            indices: Sentence numbers.
            word_values: Optional int32 [num_words] per-word values (e.g. label ids) to return
                as `label_ids` [B, W], padded with -1.
            num_words: Width W; by default the longest of these sentences.

        Returns:
            `features` float32 [B, W, D], `word_mask` int32 [B, W] and maybe `label_ids`.
        """
        lengths = [int(self.offsets[i + 1] - self.offsets[i]) for i in indices]
        width = num_words if num_words is not None else max(lengths, default=0)
        features = np.zeros((len(indices), width, self.feature_size), np.float32)
        word_mask = np.zeros((len(indices), width), np.int32)
        labels = np.full((len(indices), width), -1, np.int32)
        for row, (index, length) in enumerate(zip(indices, lengths)):
            start = int(self.offsets[index])
            features[row, :length] = self.values[start:start + length]
            word_mask[row, :length] = 1
            if word_values is not None:
                labels[row, :length] = word_values[start:start + length]
        batch = {"features": features, "word_mask": word_mask}
        if word_values is not None:
            batch["label_ids"] = labels
        return batch


def _read(folder: str) -> WordFeatures:
    return WordFeatures(values=np.load(os.path.join(folder, _FEATURES), mmap_mode="r"),
                        offsets=np.load(os.path.join(folder, _OFFSETS)))


def _write(folder: str, encoder: keras.Model, arrays: Mapping[str, np.ndarray],
           word_positions: Sequence[np.ndarray], layer_indexes: Sequence[int],
           batch_size: int) -> None:
    """Runs the encoder over `arrays` batch by batch, streaming word features into `folder`."""
    lengths = [len(positions) for positions in word_positions]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    width = len(layer_indexes) * encoder.config.hidden_size

    @tf.function(reduce_retracing=True)
    def layers(inputs):
        outputs = encoder(inputs, training=False)["encoder_outputs"]
        return tf.cast(tf.concat([outputs[i] for i in layer_indexes], axis=-1), tf.float32)

    values = np.lib.format.open_memmap(os.path.join(folder, _FEATURES), mode="w+",
                                       dtype=np.float32, shape=(int(offsets[-1]), width))
    inputs = {k: arrays[k] for k in ("input_ids", "input_mask", "segment_ids")}
    progress = Progress("sequences encoded", len(lengths))
    for start in range(0, len(lengths), batch_size):
        outputs = layers({k: v[start:start + batch_size] for k, v in inputs.items()}).numpy()
        for row, sequence in enumerate(outputs):                     # sequence: [T, D]
            positions = word_positions[start + row]
            words = values[offsets[start + row]:offsets[start + row + 1]]
            kept = positions >= 0
            words[kept] = sequence[positions[kept]]
        progress.update(len(outputs))
    progress.done()
    values.flush()
    del values
    np.save(os.path.join(folder, _OFFSETS), offsets)


def cached_word_features(cache_dir: str, key: str, info: Mapping[str, object],
                         encoder_fn: Callable[[], keras.Model], arrays: Mapping[str, np.ndarray],
                         word_positions: Sequence[np.ndarray], layer_indexes: Sequence[int],
                         batch_size: int) -> WordFeatures:
    """Returns the cached features under `key`, computing and storing them first if absent.

    Args:
        cache_dir: Folder of cache entries, one sub-folder per key.
        key: `cache_key` of everything that determines the features.
        info: Written to the entry's `info.json` for people reading the cache.
        encoder_fn: Builds the initialised encoder; only called when the entry is absent.
        arrays: int32 [N, T] `input_ids`, `input_mask`, `segment_ids`.
        word_positions: Per sentence, int [num_words] position of each word's first piece in
            its sequence, -1 where it has none.
        layer_indexes: Encoder layers to concatenate, e.g. [-1, -2, -3, -4].
        batch_size: Sequences per encoder batch.
    """
    folder = os.path.join(cache_dir, key)
    if os.path.isfile(os.path.join(folder, _INFO)):
        logging.info("feature cache hit: reusing %s", folder)
        return _read(folder)
    logging.info("feature cache miss: computing the features of %d sequences into %s",
                 len(word_positions), folder)
    shutil.rmtree(folder, ignore_errors=True)  # an entry without its info file is incomplete
    with atomic_output_folder(folder) as temp:
        _write(temp, encoder_fn(), arrays, word_positions, layer_indexes, batch_size)
        write_text_atomically(os.path.join(temp, _INFO),
                              json.dumps(dict(info), indent=2, sort_keys=True, default=str))
    return _read(folder)


def training_dataset_fn(features: WordFeatures, label_ids: np.ndarray, micro_batch: int,
                        seed: int) -> Callable[[tf.distribute.InputContext], tf.data.Dataset]:
    """An infinite, shuffled dataset of feature batches for `fine_tuning.fit_dataset`.

    Sentence numbers are shuffled and batched in the graph; each batch is gathered from the
    (memory-mapped) features on the host, padded to its longest sentence (the width W is left
    unknown to the graph, so that the training step is traced once).
    """
    def gather(indices):
        batch = features.batch(indices.tolist(), label_ids)
        return batch["features"], batch["word_mask"], batch["label_ids"]

    def to_batch(indices):
        values, word_mask, labels = tf.numpy_function(
            gather, [indices], [tf.float32, tf.int32, tf.int32], stateful=False)
        count = indices.shape[0]
        values.set_shape([count, None, features.feature_size])
        word_mask.set_shape([count, None])
        labels.set_shape([count, None])
        return {"features": values, "word_mask": word_mask, "label_ids": labels}

    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        dataset = tf.data.Dataset.range(features.num_sentences)
        dataset = dataset.shuffle(features.num_sentences, seed=seed).repeat()
        dataset = dataset.shard(context.num_input_pipelines, context.input_pipeline_id)
        dataset = dataset.batch(context.get_per_replica_batch_size(micro_batch),
                                drop_remainder=True).map(to_batch)
        options = tf.data.Options()
        # The gather reads fixed files: a saved iterator position is all there is to restore.
        options.experimental_external_state_policy = \
            tf.data.experimental.ExternalStatePolicy.IGNORE
        return dataset.with_options(options).prefetch(tf.data.AUTOTUNE)
    return dataset_fn


def predict_words(model: keras.Model, features: WordFeatures, batch_size: int) -> np.ndarray:
    """Runs the tagger (training=False) over every sentence in order.

    Returns:
        float32 [num_words, K] logits, one row per word, aligned with `features.values`.
    """
    run = tf.function(lambda batch: model(batch, training=False)["logits"],
                      reduce_retracing=True)
    rows = []
    for start in range(0, features.num_sentences, batch_size):
        indices = list(range(start, min(start + batch_size, features.num_sentences)))
        batch = features.batch(indices)
        logits = run(batch).numpy()                                        # [B, W, K]
        rows.append(logits[batch["word_mask"].astype(bool)])
    return np.concatenate(rows) if rows else np.zeros((0, model.num_labels), np.float32)
