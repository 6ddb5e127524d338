"""Pretraining instances from tokenized documents: the original's packing semantics.

Packing follows the original `create_instances_from_document`, one document at a time: gather
sentences up to a target of `max_seq_length - 3` tokens (with probability `short_seq_prob` a
random target in [2, max_seq_length - 3]), split them at a random sentence boundary into A and B;
with probability 1/2 (always when there is a single sentence) B is instead read from a random
sentence of another document and the unused sentences are put back for the next instance; then
the longer side loses tokens, front or back at random, until the pair fits. The draws are the
original's, made with Python's `random.Random`; the removal sequence is computed in closed form
and only the front/back coin flips are drawn. Masking is in `masked_lm_sampling.py`.
"""
from __future__ import annotations

import bisect
import dataclasses
import random

import numpy as np


@dataclasses.dataclass(frozen=True)
class PretrainingConfig:
    """The original script's sampling flags."""

    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    dupe_factor: int = 10
    do_whole_word_mask: bool = False

    def validate(self) -> None:
        """Raises ValueError naming the first out-of-range setting."""
        if not 5 <= self.max_seq_length <= 8192:
            raise ValueError(f"max_seq_length={self.max_seq_length} must be in [5, 8192]: "
                             "[CLS], two [SEP] and at least two tokens must fit")
        if not 1 <= self.max_predictions_per_seq <= self.max_seq_length - 3:
            raise ValueError(f"max_predictions_per_seq={self.max_predictions_per_seq} must be in "
                             f"[1, max_seq_length - 3 = {self.max_seq_length - 3}]")
        if not 0.0 < self.masked_lm_prob <= 1.0:
            raise ValueError(f"masked_lm_prob={self.masked_lm_prob} must be in (0, 1]")
        if not 0.0 <= self.short_seq_prob <= 1.0:
            raise ValueError(f"short_seq_prob={self.short_seq_prob} must be in [0, 1]")
        if self.dupe_factor < 1:
            raise ValueError(f"dupe_factor={self.dupe_factor} must be at least 1")


@dataclasses.dataclass
class DocumentWindow:
    """Tokenized documents that instances are packed from (and random B segments drawn from).

    Attributes:
      token_ids: int32 [T], the token ids of every sentence of every document, concatenated.
      sentence_bounds: per document, the offsets in `token_ids` where its sentences start,
        followed by the offset where it ends (length = number of sentences + 1).
    """

    token_ids: np.ndarray
    sentence_bounds: list[list[int]]


@dataclasses.dataclass
class SegmentPairs:
    """Where the A and B segments of N instances lie in `DocumentWindow.token_ids`.

    Attributes (int64 [N] unless noted): `a_start`, `a_length`, `b_start`, `b_length` after
    truncation; `is_random_next` bool [N].
    """

    a_start: np.ndarray
    a_length: np.ndarray
    b_start: np.ndarray
    b_length: np.ndarray
    is_random_next: np.ndarray

    def __len__(self) -> int:
        return len(self.a_start)

    def take(self, rows: np.ndarray) -> SegmentPairs:
        """The pairs at `rows` (int [M]), in that order."""
        return SegmentPairs(*(getattr(self, f.name)[rows] for f in dataclasses.fields(self)))


def _randint(rng: random.Random, low: int, high: int) -> int:
    """Uniform integer in [low, high] (as `rng.randint`, from a single float draw)."""
    return low + int(rng.random() * (high - low + 1))


def truncation_counts(a_length: int, b_length: int, max_num_tokens: int) -> tuple[int, int]:
    """Tokens the original's truncation loop removes from A and from B.

    It removes one token at a time from the longer side, B on ties; once the sides are equal
    the removals alternate B, A, B, ...
    """
    excess = a_length + b_length - max_num_tokens
    if excess <= 0:
        return 0, 0
    from_a = min(excess, a_length - b_length) if a_length > b_length else 0
    from_b = min(excess, b_length - a_length) if b_length > a_length else 0
    rest = excess - from_a - from_b
    return from_a + rest // 2, from_b + (rest + 1) // 2


def pack_documents(window: DocumentWindow, config: PretrainingConfig,
                   rng: random.Random) -> SegmentPairs:
    """Packs every document of `window` `dupe_factor` times, in document order."""
    columns: tuple[list[int], ...] = ([], [], [], [], [])
    for _ in range(config.dupe_factor):
        for document_index in range(len(window.sentence_bounds)):
            _pack_document(window.sentence_bounds, document_index, config, rng, columns)
    a_start, a_length, b_start, b_length, is_random_next = columns
    return SegmentPairs(np.array(a_start, np.int64), np.array(a_length, np.int64),
                        np.array(b_start, np.int64), np.array(b_length, np.int64),
                        np.array(is_random_next, bool))


def _pack_document(all_bounds: list[list[int]], document_index: int, config: PretrainingConfig,
                   rng: random.Random, columns: tuple[list[int], ...]) -> None:
    """Appends the instances of one document to `columns` (a_start, a_length, ... lists)."""
    bounds = all_bounds[document_index]
    num_sentences = len(bounds) - 1
    max_num_tokens = config.max_seq_length - 3
    target_length = max_num_tokens
    if rng.random() < config.short_seq_prob:
        target_length = _randint(rng, 2, max_num_tokens)
    first = 0
    while first < num_sentences:
        # Last sentence of the chunk: the first whose end reaches the target, or the last one.
        last = min(bisect.bisect_left(bounds, bounds[first] + target_length, first + 1) - 1,
                   num_sentences - 1)
        chunk_size = last - first + 1
        a_end = first + (_randint(rng, 1, chunk_size - 1) if chunk_size >= 2 else 1)
        a_start, a_length = bounds[first], bounds[a_end] - bounds[first]
        is_random_next = chunk_size == 1 or rng.random() < 0.5
        if is_random_next:
            b_start, b_length = _random_b_segment(all_bounds, document_index,
                                                  target_length - a_length, rng)
            next_first = a_end  # the chunk's unused sentences are put back
        else:
            b_start, b_length = bounds[a_end], bounds[last + 1] - bounds[a_end]
            next_first = last + 1
        cut_a, cut_b = truncation_counts(a_length, b_length, max_num_tokens)
        front_a = rng.getrandbits(cut_a).bit_count() if cut_a else 0
        front_b = rng.getrandbits(cut_b).bit_count() if cut_b else 0
        columns[0].append(a_start + front_a)
        columns[1].append(a_length - cut_a)
        columns[2].append(b_start + front_b)
        columns[3].append(b_length - cut_b)
        columns[4].append(is_random_next)
        first = next_first


def _random_b_segment(all_bounds: list[list[int]], document_index: int, target_b_length: int,
                      rng: random.Random) -> tuple[int, int]:
    """(start, length) of sentences read from a random other document up to the target."""
    for _ in range(10):
        random_index = _randint(rng, 0, len(all_bounds) - 1)
        if random_index != document_index:
            break
    bounds = all_bounds[random_index]
    start = _randint(rng, 0, len(bounds) - 2)
    end = min(bisect.bisect_left(bounds, bounds[start] + target_b_length, start + 1),
              len(bounds) - 1)
    return bounds[start], bounds[end] - bounds[start]


def assemble_tokens(token_ids: np.ndarray, pairs: SegmentPairs, max_seq_length: int,
                    cls_id: int, sep_id: int) -> tuple[np.ndarray, np.ndarray]:
    """`[CLS] A [SEP] B [SEP]` rows, zero-padded.

    Args:
      token_ids: int32 [T], `DocumentWindow.token_ids`.
      pairs: N segment pairs into `token_ids`.
      max_seq_length: L.
      cls_id: id of [CLS].
      sep_id: id of [SEP].

    Returns:
      (tokens int32 [N, L], lengths int64 [N]).
    """
    position = np.arange(max_seq_length, dtype=np.int32)[None, :]
    a_length = pairs.a_length.astype(np.int32)[:, None]
    length = a_length + pairs.b_length.astype(np.int32)[:, None] + 3
    source = np.where(position <= a_length,
                      pairs.a_start.astype(np.int32)[:, None] - 1 + position,
                      (pairs.b_start.astype(np.int32)[:, None] - a_length - 2) + position)
    real = (position >= 1) & (position < length - 1) & (position != a_length + 1)
    # Index len(token_ids) reads the appended 0 (padding and the special positions).
    tokens = np.append(token_ids, np.int32(0))[np.where(real, source, len(token_ids))]
    rows = np.arange(len(pairs))
    tokens[:, 0] = cls_id
    tokens[rows, pairs.a_length + 1] = sep_id
    tokens[rows, pairs.a_length + pairs.b_length + 2] = sep_id
    return tokens.astype(np.int32, copy=False), pairs.a_length + pairs.b_length + 3
