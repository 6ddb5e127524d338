"""Tests of data/pretraining/dataset.py on the original's TFRecord and on written files."""
import numpy as np
import pytest
import tensorflow as tf

from data.pretraining.dataset import count_records, pretraining_dataset
from tests.support import tf_examples

KEYS = {"input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids",
        "masked_lm_weights", "next_sentence_labels"}


def _original(fixtures_dir):
    return str(fixtures_dir / "pretraining_data" / "original_wwm_false.tfrecord")


def _write_examples(path, count, start, max_seq_length=8, max_predictions=2, **overrides):
    """`count` valid records whose input_ids[0] numbers them from `start`."""
    with tf.io.TFRecordWriter(str(path)) as writer:
        for index in range(start, start + count):
            values = {"input_ids": [index] + [1] * (max_seq_length - 1),
                      "input_mask": [1] * max_seq_length, "segment_ids": [0] * max_seq_length,
                      "masked_lm_positions": [1] * max_predictions,
                      "masked_lm_ids": [2] * max_predictions,
                      "masked_lm_weights": [1.0] * max_predictions,
                      "next_sentence_labels": [index % 2]}
            values.update(overrides)
            writer.write(tf_examples.example(values).SerializeToString())
    return str(path)


def _first_ids(dataset, batches):
    return [batch["input_ids"][:, 0].numpy().tolist() for batch in dataset.take(batches)]


def test_reads_the_original_tfrecord(fixtures_dir):
    path = _original(fixtures_dir)
    batches = list(pretraining_dataset(path, 16, 128, 20, is_training=False))
    assert [len(b["input_ids"]) for b in batches] == [16, 16, 16, 12]
    batch = batches[0]
    assert set(batch) == KEYS
    assert batch["input_ids"].dtype == tf.int32 and batch["masked_lm_weights"].dtype == tf.float32
    assert batch["next_sentence_labels"].shape == (16, 1)
    first = tf.train.Example.FromString(next(iter(tf.data.TFRecordDataset(path))).numpy())
    features = first.features.feature
    for key in KEYS - {"masked_lm_weights"}:
        assert batch[key][0].numpy().tolist() == list(features[key].int64_list.value)
    np.testing.assert_array_equal(batch["masked_lm_weights"][0].numpy(),
                                  features["masked_lm_weights"].float_list.value)


def test_training_stream_is_seeded_repeated_and_full_batches(tmp_path):
    files = [_write_examples(tmp_path / f"{i}.tfrecord", 5, 10 * i) for i in range(3)]
    pattern = f"{tmp_path}/*.tfrecord"

    def stream(seed):
        return _first_ids(pretraining_dataset(pattern, 4, 8, 2, True, seed=seed), 12)

    first = stream(1)
    assert first == stream(1) and first != stream(2)
    assert all(len(batch) == 4 for batch in first)
    records = set(range(5)) | set(range(10, 15)) | set(range(20, 25))
    drawn = sum(first, [])  # 48 draws: the stream repeats the 15 records
    assert set(drawn) <= records and len(set(drawn)) >= 12
    assert {value // 10 for value in drawn[:6]} != {drawn[0] // 10}  # files are interleaved
    comma_list = pretraining_dataset(",".join(files), 4, 8, 2, False)
    assert sum(_first_ids(comma_list, 10), []) == [0, 1, 2, 3, 4, 10, 11, 12, 13, 14, 20, 21,
                                                   22, 23, 24]


def test_repeated_eval_stream_wraps_around_in_file_order_with_full_batches(tmp_path):
    files = [_write_examples(tmp_path / f"{i}.tfrecord", 3, 10 * i) for i in range(2)]
    repeated = pretraining_dataset(f"{tmp_path}/*.tfrecord", 4, 8, 2, False, repeat=True)
    assert _first_ids(repeated, 4) == [[0, 1, 2, 10], [11, 12, 0, 1], [2, 10, 11, 12],
                                       [0, 1, 2, 10]]
    once = pretraining_dataset(f"{tmp_path}/*.tfrecord", 4, 8, 2, False)
    assert _first_ids(once, 4) == [[0, 1, 2, 10], [11, 12]]
    assert count_records(files) == 6
    assert count_records(",".join(files), limit=4) == 4
    assert count_records(files[0], limit=10) == 3


def test_iterator_checkpoint_resumes_the_same_batches(tmp_path):
    _write_examples(tmp_path / "a.tfrecord", 7, 0)
    _write_examples(tmp_path / "b.tfrecord", 7, 100)
    dataset = pretraining_dataset(f"{tmp_path}/*.tfrecord", 3, 8, 2, True, seed=5)
    iterator = iter(dataset)
    for _ in range(4):
        next(iterator)
    checkpoint = tf.train.Checkpoint(iterator=iterator)
    path = checkpoint.save(str(tmp_path / "ckpt" / "it"))
    expected = [next(iterator)["input_ids"][:, 0].numpy().tolist() for _ in range(6)]
    checkpoint.restore(path)
    assert [next(iterator)["input_ids"][:, 0].numpy().tolist() for _ in range(6)] == expected
    fresh = iter(pretraining_dataset(f"{tmp_path}/*.tfrecord", 3, 8, 2, True, seed=5))
    tf.train.Checkpoint(iterator=fresh).restore(path)
    assert [next(fresh)["input_ids"][:, 0].numpy().tolist() for _ in range(6)] == expected


def test_input_context_shards_files_or_records(tmp_path):
    for i in range(2):
        _write_examples(tmp_path / f"{i}.tfrecord", 4, 10 * i)
    shares = []
    for pipeline_id in range(2):
        context = tf.distribute.InputContext(num_input_pipelines=2,
                                             input_pipeline_id=pipeline_id)
        dataset = pretraining_dataset(f"{tmp_path}/*.tfrecord", 8, 8, 2, False,
                                      input_context=context)
        shares.append(sum(_first_ids(dataset, 5), []))
    assert shares == [[0, 1, 2, 3], [10, 11, 12, 13]]  # one file each
    context = tf.distribute.InputContext(num_input_pipelines=3, input_pipeline_id=1)
    single = pretraining_dataset(f"{tmp_path}/0.tfrecord", 8, 8, 2, False,
                                 input_context=context)
    assert sum(_first_ids(single, 5), []) == [1]  # every third record of one file


def test_bad_files_are_named_before_reading(tmp_path):
    good = _write_examples(tmp_path / "good.tfrecord", 2, 0)
    with pytest.raises(ValueError, match=r"'.*/\*.nothing' matches no file"):
        pretraining_dataset(f"{good},{tmp_path}/*.nothing", 2, 8, 2, True)
    short = _write_examples(tmp_path / "short.tfrecord", 1, 0, segment_ids=[0] * 7)
    with pytest.raises(ValueError, match=r"short.tfrecord, first record: feature 'segment_ids' "
                                         r"has 7 values, expected 8"):
        pretraining_dataset(f"{good},{short}", 2, 8, 2, True)
    with pytest.raises(ValueError, match=r"good.tfrecord: the records were written with "
                                         r"--max_seq_length=8 .*this run has --max_seq_length=128"):
        pretraining_dataset(good, 2, 128, 20, True)
    (tmp_path / "text.tfrecord").write_text("this is not a TFRecord file at all\n")
    with pytest.raises(ValueError, match=r"text.tfrecord: not a readable TFRecord file"):
        pretraining_dataset(str(tmp_path / "text.tfrecord"), 2, 8, 2, True)
