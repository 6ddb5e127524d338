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
from typing import Callable, Iterable, Mapping, Sequence

from absl import logging
import numpy as np

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

    def batch_signature(self, with_labels: bool) -> dict[str, tuple[type, tuple]]:
        """{name: (dtype, shape of one sentence)} of `batch`'s arrays; None: the batch's width."""
        signature = {"features": (np.float32, (None, self.feature_size)),
                     "word_mask": (np.int32, (None,))}
        if with_labels:
            signature["label_ids"] = (np.int32, (None,))
        return signature

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


def _write(folder: str, encoded: Iterable[np.ndarray], word_positions: Sequence[np.ndarray],
           width: int) -> None:
    """Streams the word features of each encoded batch (float32 [B, T, D]) into `folder`."""
    lengths = [len(positions) for positions in word_positions]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    values = np.lib.format.open_memmap(os.path.join(folder, _FEATURES), mode="w+",
                                       dtype=np.float32, shape=(int(offsets[-1]), width))
    progress = Progress("sequences encoded", len(lengths))
    start = 0
    for outputs in encoded:
        for row, sequence in enumerate(outputs):                     # sequence: [T, D]
            positions = word_positions[start + row]
            words = values[offsets[start + row]:offsets[start + row + 1]]
            kept = positions >= 0
            words[kept] = sequence[positions[kept]]
        start += len(outputs)
        progress.update(len(outputs))
    progress.done()
    if start != len(lengths):
        raise ValueError(f"{start} sequences were encoded for {len(lengths)} sentences")
    values.flush()
    del values
    np.save(os.path.join(folder, _OFFSETS), offsets)


def cached_word_features(cache_dir: str, key: str, info: Mapping[str, object],
                         encode: Callable[[], Iterable[np.ndarray]],
                         word_positions: Sequence[np.ndarray], width: int) -> WordFeatures:
    """Returns the cached features under `key`, computing and storing them first if absent.

    Args:
        cache_dir: Folder of cache entries, one sub-folder per key.
        key: `cache_key` of everything that determines the features.
        info: Written to the entry's `info.json` for people reading the cache.
        encode: Yields, batch by batch and in sentence order, float32 [B, T, D] the chosen
            encoder layers' activations of each sentence's sequence, concatenated; only called
            when the entry is absent.
        word_positions: Per sentence, int [num_words] position of each word's first piece in
            its sequence, -1 where it has none.
        width: D.
    """
    folder = os.path.join(cache_dir, key)
    if os.path.isfile(os.path.join(folder, _INFO)):
        logging.info("feature cache hit: reusing %s", folder)
        return _read(folder)
    logging.info("feature cache miss: computing the features of %d sequences into %s",
                 len(word_positions), folder)
    shutil.rmtree(folder, ignore_errors=True)  # an entry without its info file is incomplete
    with atomic_output_folder(folder) as temp:
        _write(temp, encode(), word_positions, width)
        write_text_atomically(os.path.join(temp, _INFO),
                              json.dumps(dict(info), indent=2, sort_keys=True, default=str))
    return _read(folder)
