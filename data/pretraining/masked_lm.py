"""Masked-LM position sampling of the original `create_masked_lm_predictions`, batched in NumPy.

For each instance of length n the original masks
`min(max_predictions_per_seq, max(1, round(n * masked_lm_prob)))` positions (Python's `round`,
half to even), never [CLS] or [SEP]. It visits the candidate words in a uniformly random order
and takes a word only when all of its positions still fit in the count, skipping (not stopping
at) one that would overflow. Without whole-word masking every candidate token is its own word;
with it a `##` piece joins the previous candidate (also across a [SEP]). Each chosen position
becomes [MASK] with probability 0.8, keeps its token with 0.1 and becomes a uniformly random
vocabulary token with 0.1. Positions are reported in increasing order, with their original ids.

Rows here are `[CLS] A [SEP] B [SEP]` with their special tokens at those places only, so the
candidates of a row are positions 1..a and a+2..n-2. Without whole-word masking the greedy fill
takes a uniformly random subset of the target size, drawn with Floyd's algorithm one rank at a
time for all rows. With it, a random key per word orders the words of every row and the greedy
fill runs one rank at a time across the rows.
"""
from __future__ import annotations

import dataclasses
from typing import Mapping

import numpy as np

from data import tokenization

REQUIRED_TOKENS = (tokenization.CLS, tokenization.SEP, tokenization.MASK, tokenization.UNK)


@dataclasses.dataclass(frozen=True)
class MaskingVocab:
    """The vocabulary facts masking needs.

    Attributes:
      cls_id: id of [CLS]; sep_id: id of [SEP]; mask_id: id of [MASK].
      vocab_ids: int32 [V], every id of the vocabulary (random replacements are drawn from it).
      is_continuation: bool [max id + 1], True for ids of `##` pieces.
    """

    cls_id: int
    sep_id: int
    mask_id: int
    vocab_ids: np.ndarray
    is_continuation: np.ndarray

    @classmethod
    def from_vocab(cls, vocab: Mapping[str, int], vocab_file: str = "vocab") -> MaskingVocab:
        """Builds it from a token -> id mapping; raises ValueError naming missing tokens."""
        missing = [token for token in REQUIRED_TOKENS if token not in vocab]
        if missing:
            raise ValueError(f"{vocab_file}: the vocabulary lacks {', '.join(missing)}")
        vocab_ids = np.fromiter(vocab.values(), np.int32, len(vocab))
        is_continuation = np.zeros(int(vocab_ids.max()) + 1, bool)
        for token, index in vocab.items():
            is_continuation[index] = token.startswith("##")
        return cls(vocab[tokenization.CLS], vocab[tokenization.SEP], vocab[tokenization.MASK],
                   vocab_ids, is_continuation)


@dataclasses.dataclass
class MaskedLmBatch:
    """Masked rows and their prediction targets.

    Attributes:
      input_ids: int32 [N, L], tokens after replacement.
      masked_lm_positions: int32 [N, P], increasing, zero-padded.
      masked_lm_ids: int32 [N, P], original ids at those positions, zero-padded.
      num_masked: int64 [N], number of real entries per row.
    """

    input_ids: np.ndarray
    masked_lm_positions: np.ndarray
    masked_lm_ids: np.ndarray
    num_masked: np.ndarray


def num_to_predict(lengths: np.ndarray, masked_lm_prob: float,
                   max_predictions_per_seq: int) -> np.ndarray:
    """int64 [N]: `min(max_predictions_per_seq, max(1, round(length * masked_lm_prob)))`."""
    rounded = np.round(lengths.astype(np.float64) * masked_lm_prob).astype(np.int64)
    return np.minimum(max_predictions_per_seq, np.maximum(1, rounded))


def _word_index(tokens: np.ndarray, candidates: np.ndarray, vocab: MaskingVocab) -> np.ndarray:
    """int32 [N, L]: index of the candidate word each position belongs to (-1 before any).

    Position 1 (the first token of A) is every row's first candidate, so a `##` piece there
    starts a word and one anywhere after joins the previous candidate.
    """
    continuation = vocab.is_continuation[tokens]
    continuation[:, :2] = False
    starts = candidates & ~continuation
    return np.cumsum(starts, axis=1, dtype=np.int32) - 1


def _choose_words(word_sizes: np.ndarray, num_words: np.ndarray, targets: np.ndarray,
                  rng: np.random.Generator) -> np.ndarray:
    """bool [N, W]: the words the greedy fill takes, visiting words in random order.

    Args:
      word_sizes: int64 [N, W], positions per word (0 beyond `num_words`).
      num_words: int64 [N].
      targets: int64 [N], positions to fill per row.
      rng: NumPy generator.
    """
    num_rows, max_words = word_sizes.shape
    keys = rng.random((num_rows, max_words), dtype=np.float32)
    keys[np.arange(max_words)[None, :] >= num_words[:, None]] = np.inf
    order = np.argsort(keys, axis=1)
    ordered_sizes = np.take_along_axis(word_sizes, order, axis=1)
    taken_in_order = np.zeros((num_rows, max_words), bool)
    filled = np.zeros(num_rows, np.int64)
    active = np.arange(num_rows)  # rows with room left and words left to visit
    for rank in range(max_words):
        active = active[(filled[active] < targets[active]) & (rank < num_words[active])]
        if not len(active):
            break
        sizes = ordered_sizes[active, rank]
        take = filled[active] + sizes <= targets[active]
        taken_in_order[active, rank] = take
        filled[active] += np.where(take, sizes, 0)
    taken = np.zeros((num_rows, max_words), bool)
    np.put_along_axis(taken, order, taken_in_order, axis=1)
    return taken


def _choose_whole_words(tokens: np.ndarray, candidates: np.ndarray, targets: np.ndarray,
                        max_predictions_per_seq: int, vocab: MaskingVocab,
                        rng: np.random.Generator) -> np.ndarray:
    """int64 [N, P]: increasing positions of the words taken, padded with L."""
    num_rows, max_length = tokens.shape
    word_index = _word_index(tokens, candidates, vocab)
    rows = np.repeat(np.arange(num_rows), max_length).reshape(num_rows, max_length)
    word_sizes = np.bincount((rows * max_length + word_index)[candidates],
                             minlength=num_rows * max_length).reshape(num_rows, max_length)
    taken = _choose_words(word_sizes, word_index[:, -1] + 1, targets, rng)
    chosen = candidates & np.take_along_axis(taken, np.maximum(word_index, 0), axis=1)
    positions = np.where(chosen, np.arange(max_length)[None, :], max_length)
    return np.sort(positions, axis=1)[:, :max_predictions_per_seq]


def _choose_tokens(num_candidates: np.ndarray, a_lengths: np.ndarray, counts: np.ndarray,
                   max_length: int, max_predictions_per_seq: int,
                   rng: np.random.Generator) -> np.ndarray:
    """int64 [N, P]: `counts` uniformly chosen candidate positions per row, increasing,
    padded with L.

    Floyd's algorithm draws a uniformly random subset of ranks in [0, num_candidates); rank r
    is position r + 1 in A and r + 2 in B.
    """
    num_rows = len(counts)
    rows = np.arange(num_rows)
    taken = np.zeros((num_rows, max_length), bool)  # by rank
    ranks = np.full((num_rows, max_predictions_per_seq), max_length, np.int64)
    for step in range(int(counts.max(initial=0))):
        active = step < counts
        last = num_candidates - counts + step  # draw from [0, last]
        pick = np.minimum((rng.random(num_rows) * (last + 1)).astype(np.int64), max_length - 1)
        pick = np.where(taken[rows, pick], last, pick)
        pick = np.where(active, pick, max_length)
        taken[rows[active], pick[active]] = True
        ranks[:, step] = pick
    positions = np.where(ranks < a_lengths[:, None], ranks + 1, ranks + 2)
    return np.sort(np.minimum(positions, max_length), axis=1)


def mask_tokens(tokens: np.ndarray, lengths: np.ndarray, a_lengths: np.ndarray,
                masked_lm_prob: float, max_predictions_per_seq: int, do_whole_word_mask: bool,
                vocab: MaskingVocab, rng: np.random.Generator) -> MaskedLmBatch:
    """Chooses and replaces the masked-LM positions of every row.

    Args:
      tokens: int32 [N, L], `[CLS] A [SEP] B [SEP]` rows, zero-padded.
      lengths: int64 [N], real length of each row.
      a_lengths: int64 [N], tokens of A (the first [SEP] is at a_lengths + 1).
      masked_lm_prob: share of each row's tokens to predict.
      max_predictions_per_seq: P, the most positions per row.
      do_whole_word_mask: choose all pieces of a word together.
      vocab: special ids, vocabulary ids and `##` flags.
      rng: NumPy generator for every draw.
    """
    num_rows, max_length = tokens.shape
    num_candidates = lengths - 3
    targets = num_to_predict(lengths, masked_lm_prob, max_predictions_per_seq)
    if do_whole_word_mask:
        position = np.arange(max_length)[None, :]
        candidates = ((position >= 1) & (position < lengths[:, None] - 1)
                      & (position != a_lengths[:, None] + 1))
        positions = _choose_whole_words(tokens, candidates, targets, max_predictions_per_seq,
                                        vocab, rng)
    else:
        positions = _choose_tokens(num_candidates, a_lengths, np.minimum(targets, num_candidates),
                                   max_length, max_predictions_per_seq, rng)
    used = positions < max_length
    positions = np.where(used, positions, 0)
    rows = np.arange(num_rows)[:, None]
    original = np.where(used, tokens[rows, positions], 0)
    draws = rng.random((2,) + positions.shape)
    random_ids = vocab.vocab_ids[rng.integers(0, len(vocab.vocab_ids), positions.shape)]
    replaced = np.where(draws[0] < 0.8, vocab.mask_id,
                        np.where(draws[1] < 0.5, original, random_ids))
    input_ids = tokens.copy()
    # Unused slots point at position 0 and write [CLS] back onto it.
    input_ids[rows, positions] = np.where(used, replaced, vocab.cls_id)
    return MaskedLmBatch(input_ids, positions.astype(np.int32), original.astype(np.int32),
                         used.sum(axis=1))
