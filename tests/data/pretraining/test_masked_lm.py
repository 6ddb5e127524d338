"""Tests of data/pretraining/masked_lm.py against the original's rules and the reference."""
import random

import numpy as np
import pytest

from bench.data import original_pretraining as reference
from data.pretraining import masked_lm as sampling

VOCAB_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat",
                "run", "##s", "##ning", "jump", "##ed"]
VOCAB = {token: index for index, token in enumerate(VOCAB_TOKENS)}
MASKING_VOCAB = sampling.MaskingVocab.from_vocab(VOCAB)


def _rows(token_lists, max_length):
    """(tokens [N, L], lengths [N], A lengths [N]) of `[CLS] A [SEP] B [SEP]` token lists."""
    tokens = np.zeros((len(token_lists), max_length), np.int32)
    for row, tokens_of_row in enumerate(token_lists):
        tokens[row, :len(tokens_of_row)] = [VOCAB[t] for t in tokens_of_row]
    return (tokens, np.array([len(t) for t in token_lists], np.int64),
            np.array([t.index("[SEP]") - 1 for t in token_lists], np.int64))


def test_num_to_predict_is_the_original_formula():
    lengths = np.arange(0, 600)
    for prob in (0.15, 0.1, 0.2, 0.5, 1 / 3):
        expected = [min(20, max(1, int(round(n * prob)))) for n in lengths]
        assert sampling.num_to_predict(lengths, prob, 20).tolist() == expected


def test_missing_special_tokens_are_named():
    with pytest.raises(ValueError, match=r"my_vocab.txt: the vocabulary lacks \[MASK\], \[UNK\]"):
        sampling.MaskingVocab.from_vocab({"[CLS]": 0, "[SEP]": 1}, "my_vocab.txt")


def test_masked_positions_follow_the_rules():
    rng = np.random.default_rng(0)
    words = ["the", "cat", "sat", "run", "##s", "jump", "##ed"]
    token_lists = []
    for _ in range(500):
        a = list(rng.choice(words, rng.integers(1, 30)))
        b = list(rng.choice(words, rng.integers(1, 30)))
        token_lists.append(["[CLS]", *a, "[SEP]", *b, "[SEP]"])
    tokens, lengths, a_lengths = _rows(token_lists, 64)
    batch = sampling.mask_tokens(tokens, lengths, a_lengths, 0.15, 6, False, MASKING_VOCAB, rng)
    for row in range(len(token_lists)):
        count = int(batch.num_masked[row])
        positions = batch.masked_lm_positions[row, :count]
        assert count == min(6, max(1, round(lengths[row] * 0.15)))
        assert np.all(np.diff(positions) > 0) and np.all(positions < lengths[row])
        assert not np.isin(tokens[row, positions], [VOCAB["[CLS]"], VOCAB["[SEP]"]]).any()
        assert batch.masked_lm_ids[row, :count].tolist() == tokens[row, positions].tolist()
        assert not batch.masked_lm_positions[row, count:].any()
        unchanged = np.ones(64, bool)
        unchanged[positions] = False
        assert batch.input_ids[row, unchanged].tolist() == tokens[row, unchanged].tolist()


def test_replacement_shares_are_80_10_10():
    rng = np.random.default_rng(1)
    row = ["[CLS]", *["cat"] * 60, "[SEP]", "sat", "[SEP]"]
    tokens, lengths, a_lengths = _rows([row] * 3000, 64)
    batch = sampling.mask_tokens(tokens, lengths, a_lengths, 0.15, 10, False, MASKING_VOCAB, rng)
    shown = batch.input_ids[np.arange(3000)[:, None], batch.masked_lm_positions]
    total = shown.size  # 30,000 positions: 4 standard errors are under 0.01
    mask_share = np.mean(shown == VOCAB["[MASK]"])
    kept_share = np.mean(shown == VOCAB["cat"])  # includes random draws of "cat" (1/15 of 10%)
    assert abs(mask_share - 0.8) < 4 * np.sqrt(0.8 * 0.2 / total)
    assert abs(kept_share - (0.1 + 0.1 / len(VOCAB))) < 4 * np.sqrt(0.1 * 0.9 / total)
    drawn = shown[(shown != VOCAB["[MASK]"]) & (shown != VOCAB["cat"])]
    assert set(np.unique(drawn)) == set(range(len(VOCAB))) - {VOCAB["[MASK]"], VOCAB["cat"]}


def test_each_candidate_is_equally_likely():
    rng = np.random.default_rng(2)
    row = ["[CLS]", *["cat"] * 9, "[SEP]", *["sat"] * 9, "[SEP]"]
    tokens, lengths, a_lengths = _rows([row] * 20000, 21)
    batch = sampling.mask_tokens(tokens, lengths, a_lengths, 0.15, 5, False, MASKING_VOCAB, rng)
    counts = np.bincount(batch.masked_lm_positions[batch.masked_lm_positions > 0], minlength=21)
    candidates = [p for p in range(21) if p not in (0, 10, 20)]
    expected = 20000 * 3 / 18  # round(21 * 0.15) = 3 of 18 candidates
    assert np.all(np.abs(counts[candidates] - expected) < 4 * np.sqrt(expected))
    assert counts[[0, 10, 20]].sum() == 0


def test_whole_word_masking_skips_words_that_do_not_fit():
    """Words of 3, 1 and 1 pieces with 2 to predict: the 3-piece word is always skipped."""
    rng = np.random.default_rng(3)
    row = ["[CLS]", "run", "##ning", "##s", "cat", "[SEP]", "sat", "[SEP]"]
    tokens, lengths, a_lengths = _rows([row] * 200, 8)
    batch = sampling.mask_tokens(tokens, lengths, a_lengths, 0.25, 20, True, MASKING_VOCAB, rng)
    assert np.all(batch.num_masked == 2)
    assert np.all(batch.masked_lm_positions[:, :2] == [4, 6])


def test_whole_word_masking_joins_a_piece_after_sep_to_the_previous_word():
    rng = np.random.default_rng(4)
    row = ["[CLS]", "jump", "[SEP]", "##ed", "cat", "[SEP]"]
    tokens, lengths, a_lengths = _rows([row] * 200, 6)
    batch = sampling.mask_tokens(tokens, lengths, a_lengths, 0.34, 20, True, MASKING_VOCAB, rng)
    pairs = {tuple(row[:n]) for row, n in zip(batch.masked_lm_positions.tolist(),
                                               batch.num_masked.tolist())}
    # round(6 * 0.34) = 2 positions: the word "jump ##ed" (positions 1 and 3) when it comes
    # first, else "cat" alone (the word no longer fits after it); never one of 1 and 3 alone.
    assert pairs == {(1, 3), (4,)}


def test_whole_word_position_frequencies_equal_the_reference():
    sentence = ["[CLS]", "the", "cat", "run", "##ning", "##s", "on", "jump", "##ed", "mat",
                "[SEP]", "run", "##s", "the", "mat", "jump", "##ed", "[SEP]"]
    draws = 6000
    rng = random.Random(5)
    expected = np.zeros(len(sentence))
    for _ in range(draws):
        _, positions, _ = reference.create_masked_lm_predictions(
            sentence, 0.25, 20, VOCAB_TOKENS, True, rng)
        expected[positions] += 1
    tokens, lengths, a_lengths = _rows([sentence] * draws, len(sentence))
    batch = sampling.mask_tokens(tokens, lengths, a_lengths, 0.25, 20, True, MASKING_VOCAB,
                                 np.random.default_rng(6))
    ours = np.bincount(batch.masked_lm_positions[:, :].ravel()[batch.masked_lm_positions.ravel()
                                                                 > 0], minlength=len(sentence))
    # Difference of two binomial counts: 4 standard deviations.
    p = expected / draws
    assert np.all(np.abs(ours - expected) <= 4 * np.sqrt(2 * draws * p * (1 - p)) + 1)
