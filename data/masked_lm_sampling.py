"""Masked-LM position sampling of the original `create_masked_lm_predictions`, batched in NumPy.

For each instance of length n the original masks
`min(max_predictions_per_seq, max(1, round(n * masked_lm_prob)))` positions (Python's `round`,
half to even), never [CLS] or [SEP]. It visits the candidate words in a uniformly random order
and takes a word only when all of its positions still fit in the count, skipping (not stopping
at) one that would overflow. Without whole-word masking every candidate token is its own word;
with it a `##` piece joins the previous candidate (also across a [SEP]). Each chosen position
becomes [MASK] with probability 0.8, keeps its token with 0.1 and becomes a uniformly random
vocabulary token with 0.1. Positions are reported in increasing order, with their original ids.

Here a random key per word orders the words of every row at once, and the greedy fill runs one
rank at a time across the rows.
"""
from __future__ import annotations

import dataclasses
from typing import Mapping

import numpy as np

REQUIRED_TOKENS = ("[CLS]", "[SEP]", "[MASK]", "[UNK]")


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
        return cls(vocab["[CLS]"], vocab["[SEP]"], vocab["[MASK]"], vocab_ids, is_continuation)


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


def _word_index(tokens: np.ndarray, candidates: np.ndarray, do_whole_word_mask: bool,
                vocab: MaskingVocab) -> np.ndarray:
    """int64 [N, L]: index of the candidate word each position belongs to (-1 before any)."""
    starts = candidates
    if do_whole_word_mask:
        continuation = vocab.is_continuation[tokens] & candidates
        after_a_candidate = (np.cumsum(candidates, axis=1) - candidates) > 0
        starts = candidates & ~(continuation & after_a_candidate)
    return np.cumsum(starts, axis=1) - 1


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
    keys = rng.random((num_rows, max_words))
    keys[np.arange(max_words)[None, :] >= num_words[:, None]] = np.inf
    order = np.argsort(keys, axis=1)
    ordered_sizes = np.take_along_axis(word_sizes, order, axis=1)
    taken_in_order = np.zeros((num_rows, max_words), bool)
    filled = np.zeros(num_rows, np.int64)
    for rank in range(max_words):
        sizes = ordered_sizes[:, rank]
        take = (sizes > 0) & (filled + sizes <= targets)
        taken_in_order[:, rank] = take
        filled += np.where(take, sizes, 0)
        if np.all((filled >= targets) | (rank + 1 >= num_words)):
            break
    taken = np.zeros((num_rows, max_words), bool)
    np.put_along_axis(taken, order, taken_in_order, axis=1)
    return taken


def _choose_tokens(candidates: np.ndarray, targets: np.ndarray, max_predictions_per_seq: int,
                   rng: np.random.Generator) -> np.ndarray:
    """bool [N, L]: `targets` (at most all) candidates per row, uniformly without replacement.

    Without whole-word masking every word is one token, so the greedy fill takes the first
    `targets` candidates of a random order: the candidates with the smallest random keys.
    """
    num_rows, max_length = candidates.shape
    keys = rng.random((num_rows, max_length), dtype=np.float32)
    keys[~candidates] = 2.0
    smallest = np.argpartition(keys, max_predictions_per_seq - 1, axis=1)
    smallest = smallest[:, :max_predictions_per_seq]
    ranked = np.take_along_axis(
        smallest, np.argsort(np.take_along_axis(keys, smallest, axis=1), axis=1), axis=1)
    take = np.arange(max_predictions_per_seq)[None, :] < np.minimum(
        targets, candidates.sum(axis=1))[:, None]
    rows, ranks = np.nonzero(take)
    chosen = np.zeros((num_rows, max_length), bool)
    chosen[rows, ranked[rows, ranks]] = True
    return chosen


def _choose_whole_words(tokens: np.ndarray, candidates: np.ndarray, targets: np.ndarray,
                        vocab: MaskingVocab, rng: np.random.Generator) -> np.ndarray:
    """bool [N, L]: positions of the words the greedy fill takes (whole-word masking)."""
    num_rows, max_length = tokens.shape
    word_index = _word_index(tokens, candidates, True, vocab)
    rows = np.repeat(np.arange(num_rows), max_length).reshape(num_rows, max_length)
    word_sizes = np.bincount((rows * max_length + word_index)[candidates],
                             minlength=num_rows * max_length).reshape(num_rows, max_length)
    taken = _choose_words(word_sizes, word_index[:, -1] + 1, targets, rng)
    return candidates & np.take_along_axis(taken, np.maximum(word_index, 0), axis=1)


def mask_tokens(tokens: np.ndarray, lengths: np.ndarray, masked_lm_prob: float,
                max_predictions_per_seq: int, do_whole_word_mask: bool, vocab: MaskingVocab,
                rng: np.random.Generator) -> MaskedLmBatch:
    """Chooses and replaces the masked-LM positions of every row.

    Args:
      tokens: int32 [N, L], `[CLS] A [SEP] B [SEP]` rows, zero-padded.
      lengths: int64 [N], real length of each row.
      masked_lm_prob: share of each row's tokens to predict.
      max_predictions_per_seq: P, the most positions per row.
      do_whole_word_mask: choose all pieces of a word together.
      vocab: special ids, vocabulary ids and `##` flags.
      rng: NumPy generator for every draw.
    """
    num_rows, max_length = tokens.shape
    real = np.arange(max_length)[None, :] < lengths[:, None]
    candidates = real & (tokens != vocab.cls_id) & (tokens != vocab.sep_id)
    targets = num_to_predict(lengths, masked_lm_prob, max_predictions_per_seq)
    if do_whole_word_mask:
        chosen = _choose_whole_words(tokens, candidates, targets, vocab, rng)
    else:
        chosen = _choose_tokens(candidates, targets, max_predictions_per_seq, rng)
    chosen_rows, chosen_positions = np.nonzero(chosen)  # row-major: positions increase per row
    num_masked = chosen.sum(axis=1)
    row_starts = np.cumsum(num_masked) - num_masked
    slots = np.arange(len(chosen_rows)) - row_starts[chosen_rows]
    original = tokens[chosen_rows, chosen_positions]
    draws = rng.random((2, len(chosen_rows)))
    random_ids = vocab.vocab_ids[rng.integers(0, len(vocab.vocab_ids), len(chosen_rows))]
    replaced = np.where(draws[0] < 0.8, vocab.mask_id,
                        np.where(draws[1] < 0.5, original, random_ids))
    input_ids = tokens.copy()
    input_ids[chosen_rows, chosen_positions] = replaced
    positions = np.zeros((num_rows, max_predictions_per_seq), np.int32)
    masked_ids = np.zeros((num_rows, max_predictions_per_seq), np.int32)
    positions[chosen_rows, slots] = chosen_positions
    masked_ids[chosen_rows, slots] = original
    return MaskedLmBatch(input_ids, positions, masked_ids, num_masked.astype(np.int64))
