"""Pretraining instances from tokenized documents: the original's packing semantics.

Packing follows the original `create_instances_from_document`, one document at a time: gather
sentences up to a target of `max_seq_length - 3` tokens (with probability `short_seq_prob` a
random target in [2, max_seq_length - 3]), split them at a random sentence boundary into A and B;
with probability 1/2 (always when there is a single sentence) B is instead read from a random
sentence of another document and the unused sentences are put back for the next instance; then
the longer side loses tokens, front or back at random, until the pair fits. The draws are the
original's, made with Python's `random.Random`; the truncation's removal counts are computed in
closed form and its front/back coin flips drawn as binomial counts, for all instances at once.
Masking is in `masked_lm_sampling.py`.
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


def truncation_counts(a_length: np.ndarray, b_length: np.ndarray,
                      max_num_tokens: int) -> tuple[np.ndarray, np.ndarray]:
    """Tokens the original's truncation loop removes from A and from B (int arrays [N]).

    It removes one token at a time from the longer side, B on ties; once the sides are equal
    the removals alternate B, A, B, ...
    """
    excess = np.maximum(a_length + b_length - max_num_tokens, 0)
    from_a = np.where(a_length > b_length, np.minimum(excess, a_length - b_length), 0)
    from_b = np.where(b_length > a_length, np.minimum(excess, b_length - a_length), 0)
    rest = excess - from_a - from_b
    return from_a + rest // 2, from_b + (rest + 1) // 2


def pack_documents(window: DocumentWindow, config: PretrainingConfig, rng: random.Random,
                   truncation_rng: np.random.Generator) -> SegmentPairs:
    """Packs every document of `window` `dupe_factor` times, in document order.

    Args:
      window: the documents.
      config: sampling settings.
      rng: draws of the packing (targets, split points, random next sentences).
      truncation_rng: front/back coin flips of the truncation (as binomial counts).
    """
    rows: list[tuple[int, int, int, int, bool]] = []
    for _ in range(config.dupe_factor):
        for document_index in range(len(window.sentence_bounds)):
            _pack_document(window.sentence_bounds, document_index, config, rng, rows)
    columns = np.array(rows, np.int64).reshape(-1, 5)
    a_start, a_length, b_start, b_length = columns[:, :4].T
    cut_a, cut_b = truncation_counts(a_length, b_length, config.max_seq_length - 3)
    # Each removal is from the front with probability 1/2, independently.
    return SegmentPairs(a_start + truncation_rng.binomial(cut_a, 0.5), a_length - cut_a,
                        b_start + truncation_rng.binomial(cut_b, 0.5), b_length - cut_b,
                        columns[:, 4].astype(bool))


def _pack_document(all_bounds: list[list[int]], document_index: int, config: PretrainingConfig,
                   rng: random.Random, rows: list[tuple[int, int, int, int, bool]]) -> None:
    """Appends (a_start, a_length, b_start, b_length, is_random_next) of each instance of one
    document to `rows`, before truncation."""
    bounds = all_bounds[document_index]
    num_sentences = len(bounds) - 1
    max_num_tokens = config.max_seq_length - 3
    uniform = rng.random  # a uniform integer in [lo, lo + n) is lo + int(uniform() * n)
    target_length = max_num_tokens
    if uniform() < config.short_seq_prob:
        target_length = 2 + int(uniform() * (max_num_tokens - 1))
    first = 0
    while first < num_sentences:
        # Last sentence of the chunk: the first whose end reaches the target, or the last one.
        last = min(bisect.bisect_left(bounds, bounds[first] + target_length, first + 1) - 1,
                   num_sentences - 1)
        chunk_size = last - first + 1
        a_end = first + 1 + (int(uniform() * (chunk_size - 1)) if chunk_size >= 2 else 0)
        a_start, a_length = bounds[first], bounds[a_end] - bounds[first]
        if chunk_size == 1 or uniform() < 0.5:
            b_start, b_length = _random_b_segment(all_bounds, document_index,
                                                  target_length - a_length, uniform)
            rows.append((a_start, a_length, b_start, b_length, True))
            first = a_end  # the chunk's unused sentences are put back
        else:
            rows.append((a_start, a_length, bounds[a_end], bounds[last + 1] - bounds[a_end],
                         False))
            first = last + 1


def _random_b_segment(all_bounds: list[list[int]], document_index: int, target_b_length: int,
                      uniform) -> tuple[int, int]:
    """(start, length) of sentences read from a random other document up to the target."""
    for _ in range(10):
        random_index = int(uniform() * len(all_bounds))
        if random_index != document_index:
            break
    bounds = all_bounds[random_index]
    start = int(uniform() * (len(bounds) - 1))
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
