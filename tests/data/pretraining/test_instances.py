"""Tests of data/pretraining/instances.py against the original algorithm (the reference)."""
import random

import numpy as np
import pytest

from bench.data import original_pretraining as reference
from data.pretraining import instances as instances


def _window(sentence_lengths_per_document):
    """A DocumentWindow whose token ids are their own positions."""
    bounds, offset = [], 0
    for lengths in sentence_lengths_per_document:
        document = [offset]
        for length in lengths:
            offset += length
            document.append(offset)
        bounds.append(document)
    return instances.DocumentWindow(np.arange(offset, dtype=np.int32), bounds)


def test_truncation_counts_equal_the_original_loop():
    rng = random.Random(0)
    a_length, b_length = [a.ravel() for a in np.meshgrid(np.arange(1, 40), np.arange(1, 40))]
    for max_num_tokens in range(2, 30):
        cut_a, cut_b = instances.truncation_counts(a_length, b_length, max_num_tokens)
        for a, b, expected_a, expected_b in zip(a_length, b_length, cut_a, cut_b):
            tokens_a, tokens_b = ["a"] * a, ["b"] * b
            reference.truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
            assert (a - len(tokens_a), b - len(tokens_b)) == (expected_a, expected_b)


def test_config_validation_names_the_setting():
    instances.PretrainingConfig().validate()
    for bad, name in [(dict(max_seq_length=4), "max_seq_length"),
                      (dict(max_predictions_per_seq=0), "max_predictions_per_seq"),
                      (dict(max_predictions_per_seq=126), "max_predictions_per_seq"),
                      (dict(masked_lm_prob=0.0), "masked_lm_prob"),
                      (dict(short_seq_prob=1.5), "short_seq_prob"),
                      (dict(dupe_factor=0), "dupe_factor")]:
        with pytest.raises(ValueError, match=name):
            instances.PretrainingConfig(**bad).validate()


def test_packed_pairs_respect_the_original_invariants():
    rng = np.random.default_rng(0)
    window = _window([rng.integers(1, 40, rng.integers(1, 15)).tolist() for _ in range(30)])
    config = instances.PretrainingConfig(max_seq_length=64, dupe_factor=3)
    pairs = instances.pack_documents(window, config, random.Random(1), np.random.default_rng(1))
    assert np.all(pairs.a_length >= 1) and np.all(pairs.b_length >= 1)
    assert np.all(pairs.a_length + pairs.b_length <= 61)
    document_of = np.searchsorted([b[-1] for b in window.sentence_bounds], np.arange(
        len(window.token_ids)), side="right")
    a_end = pairs.a_start + pairs.a_length - 1
    b_end = pairs.b_start + pairs.b_length - 1
    # Each segment lies within one document; an actual next B follows A in A's document.
    assert np.all(document_of[pairs.a_start] == document_of[a_end])
    assert np.all(document_of[pairs.b_start] == document_of[b_end])
    actual = ~pairs.is_random_next
    assert np.all(document_of[pairs.a_start[actual]] == document_of[pairs.b_start[actual]])
    assert np.all(pairs.b_start[actual] > a_end[actual])


def test_every_document_gives_an_instance_per_pass():
    window = _window([[3], [5, 2], [1, 1, 1]])
    config = instances.PretrainingConfig(max_seq_length=16, dupe_factor=4)
    pairs = instances.pack_documents(window, config, random.Random(2), np.random.default_rng(2))
    assert len(pairs) >= 3 * 4
    # A single-sentence document always gets a random next sentence.
    starts = pairs.a_start[pairs.a_start == 0]
    assert len(starts) >= 4 and np.all(pairs.is_random_next[pairs.a_start == 0])


def _reference_pairs(lengths_per_document, max_seq_length, dupe_factor, seed):
    """(a_length, b_length, is_random_next) of the reference's instances."""
    documents = [[["w"] * n for n in lengths] for lengths in lengths_per_document]
    made = reference.create_training_instances(
        documents, ["w"], max_seq_length, dupe_factor, 0.1, 0.15, 1, False, random.Random(seed))
    segment_ids = [np.array(instance.segment_ids) for instance in made]
    return (np.array([np.sum(s == 0) - 2 for s in segment_ids]),
            np.array([np.sum(s == 1) - 1 for s in segment_ids]),
            np.array([instance.is_random_next for instance in made]))


def test_packing_statistics_equal_the_reference():
    """Instance count, next-sentence share and segment lengths match the original's draws."""
    rng = np.random.default_rng(3)
    lengths = [rng.integers(1, 30, rng.integers(1, 25)).tolist() for _ in range(40)]
    a_ref, b_ref, random_ref = _reference_pairs(lengths, 64, 40, seed=4)
    config = instances.PretrainingConfig(max_seq_length=64, dupe_factor=40)
    pairs = instances.pack_documents(_window(lengths), config, random.Random(5),
                                     np.random.default_rng(5))
    # About 7,500 instances each. The count varies by about 1.2% (one standard deviation)
    # between seeds, so 7% is 4 standard deviations of a difference; the rest are 4 standard
    # errors of a difference of two means.
    assert abs(len(pairs) - len(a_ref)) < 0.07 * len(a_ref)
    assert abs(pairs.is_random_next.mean() - random_ref.mean()) < 4 * np.sqrt(
        2 * 0.25 / len(a_ref))
    for ours, theirs in [(pairs.a_length, a_ref), (pairs.b_length, b_ref)]:
        assert abs(ours.mean() - theirs.mean()) < 4 * theirs.std() * np.sqrt(2 / len(theirs))


def test_assemble_tokens_layout():
    token_ids = np.arange(100, 120, dtype=np.int32)
    pairs = instances.SegmentPairs(np.array([0, 10]), np.array([2, 1]), np.array([5, 3]),
                                   np.array([3, 1]), np.array([False, True]))
    tokens, lengths = instances.assemble_tokens(token_ids, pairs, 10, cls_id=1, sep_id=2)
    assert tokens.tolist() == [[1, 100, 101, 2, 105, 106, 107, 2, 0, 0],
                               [1, 110, 2, 103, 2, 0, 0, 0, 0, 0]]
    assert lengths.tolist() == [8, 5]
