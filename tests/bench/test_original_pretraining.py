"""The reference implementation reproduces the original script's instances draw for draw, so the
statistics tests and the benchmark compare against the original algorithm itself."""
import json
import random

import pytest
import tensorflow as tf

from bench.data import original_pretraining as reference


@pytest.mark.parametrize("do_whole_word_mask", [False, True])
def test_reference_reproduces_the_original_instances_exactly(fixtures_dir, uncased_vocab,
                                                             do_whole_word_mask):
    folder = fixtures_dir / "pretraining_data"
    name = f"original_wwm_{str(do_whole_word_mask).lower()}.instances.jsonl"
    expected = [json.loads(line) for line in (folder / name).read_text().splitlines()]
    made = reference.run_reference([str(folder / "sample_text.txt")], [], str(uncased_vocab),
                                   dupe_factor=5, do_whole_word_mask=do_whole_word_mask)
    assert len(made) == len(expected)
    for instance, original in zip(made, expected):
        assert instance.tokens == original["tokens"]
        assert instance.segment_ids == original["segment_ids"]
        assert instance.is_random_next == original["is_random_next"]
        assert instance.masked_lm_positions == original["masked_lm_positions"]
        assert instance.masked_lm_labels == original["masked_lm_labels"]


def test_reference_writes_the_original_tfrecord_content(tmp_path, fixtures_dir, uncased_vocab):
    folder = fixtures_dir / "pretraining_data"
    output = tmp_path / "reference.tfrecord"
    reference.run_reference([str(folder / "sample_text.txt")], [str(output)],
                            str(uncased_vocab), dupe_factor=5)
    ours = [tf.train.Example.FromString(r.numpy())
            for r in tf.data.TFRecordDataset(str(output))]
    original = [tf.train.Example.FromString(r.numpy())
                for r in tf.data.TFRecordDataset(str(folder / "original_wwm_false.tfrecord"))]
    assert ours == original


def test_truncation_and_masking_rules_of_the_reference():
    tokens_a, tokens_b = list("abcdefgh"), list("xy")
    rng = random.Random(0)
    reference.truncate_seq_pair(tokens_a, tokens_b, 6, rng)
    assert len(tokens_a) == 4 and tokens_b == ["x", "y"]  # only the longer side shrinks
    output, positions, labels = reference.create_masked_lm_predictions(
        ["[CLS]", "a", "##b", "c", "[SEP]", "d", "[SEP]"], 0.5, 20, ["z"], True, rng)
    assert positions == sorted(positions) and 0 not in positions and 4 not in positions
    assert (1 in positions) == (2 in positions)  # "a ##b" is masked as one word
    assert len(labels) == len(positions) <= 4
    assert len(output) == 7
