"""Tests of data/pretraining/records.py: the batch encoder writes canonical Examples."""
import numpy as np
import tensorflow as tf

from data import tfrecord_schema as schema
from data.pretraining import records as pretraining_records
from tests.support import tf_examples

WRITER_ORDER = [field.key for field in schema.pretraining_fields(128, 20)]


def _random_batch(rng, rows, max_seq_length, max_predictions, vocab_size):
    lengths = rng.integers(5, max_seq_length + 1, rows)
    a_lengths = np.array([rng.integers(1, n - 3) if n > 4 else 1 for n in lengths])
    input_ids = rng.integers(0, vocab_size, (rows, max_seq_length)).astype(np.int32)
    input_ids[np.arange(max_seq_length)[None, :] >= lengths[:, None]] = 0
    num_masked = rng.integers(0, max_predictions + 1, rows)
    positions = rng.integers(1, max_seq_length, (rows, max_predictions)).astype(np.int32)
    labels = rng.integers(0, vocab_size, (rows, max_predictions)).astype(np.int32)
    unused = np.arange(max_predictions)[None, :] >= num_masked[:, None]
    positions[unused] = 0
    labels[unused] = 0
    is_random_next = rng.random(rows) < 0.5
    return input_ids, lengths, a_lengths, positions, labels, num_masked, is_random_next


def _expected_record(row, input_ids, lengths, a_lengths, positions, labels, num_masked,
                     is_random_next):
    max_seq_length, max_predictions = input_ids.shape[1], positions.shape[1]
    index = np.arange(max_seq_length)
    return tf_examples.example({
        "input_ids": input_ids[row].tolist(),
        "input_mask": (index < lengths[row]).astype(int).tolist(),
        "segment_ids": ((index >= a_lengths[row] + 2) & (index < lengths[row])).astype(
            int).tolist(),
        "masked_lm_positions": positions[row].tolist(),
        "masked_lm_ids": labels[row].tolist(),
        "masked_lm_weights": [1.0] * int(num_masked[row]) + [0.0] * int(
            max_predictions - num_masked[row]),
        "next_sentence_labels": [int(is_random_next[row])],
    })


def test_records_are_tensorflow_examples_in_the_writer_order_byte_for_byte():
    rng = np.random.default_rng(0)
    for max_seq_length, max_predictions, vocab_size in [(128, 20, 30522), (512, 80, 119547),
                                                        (8, 2, 100)]:
        batch = _random_batch(rng, 50, max_seq_length, max_predictions, vocab_size)
        input_ids, labels = batch[0], batch[4]
        input_ids[0, 2] = 0  # id 0 ([PAD]) drawn as a random replacement, inside the row
        input_ids[1, :] = 0
        input_ids[2, :] = min(127, vocab_size - 1)  # one-byte varints up to the end
        labels[3, 0] = 0
        encoder = pretraining_records.PretrainingRecordEncoder(max_seq_length, max_predictions,
                                                               vocab_size)
        records = encoder.encode(*batch)
        assert len(records) == 50
        for row, record in enumerate(records):
            expected = _expected_record(row, *batch)
            assert tf.train.Example.FromString(record) == expected
            assert record == tf_examples.serialize_in_order(expected, WRITER_ORDER)


def test_records_reencode_the_original_records(fixtures_dir):
    """The original's 60 records: same Examples, each entry written as protobuf writes it."""
    path = fixtures_dir / "pretraining_data" / "original_wwm_false.tfrecord"
    originals = [record.numpy() for record in tf.data.TFRecordDataset(str(path))]
    parsed = tf.io.parse_example(originals, schema.pretraining_feature_spec(128, 20))
    input_mask, segment_ids = parsed["input_mask"].numpy(), parsed["segment_ids"].numpy()
    lengths = input_mask.sum(axis=1)
    a_lengths = ((segment_ids == 0) & (input_mask == 1)).sum(axis=1) - 2  # [CLS] A [SEP]
    encoder = pretraining_records.PretrainingRecordEncoder(128, 20, 30522)
    records = encoder.encode(
        parsed["input_ids"].numpy().astype(np.int32), lengths, a_lengths,
        parsed["masked_lm_positions"].numpy().astype(np.int32),
        parsed["masked_lm_ids"].numpy().astype(np.int32),
        parsed["masked_lm_weights"].numpy().sum(axis=1).astype(np.int64),
        parsed["next_sentence_labels"].numpy()[:, 0] == 1)
    assert len(records) == len(originals) == 60
    for record, original in zip(records, originals):
        example = tf.train.Example.FromString(original)
        assert tf.train.Example.FromString(record) == example
        # The original's bytes hold the same entries in the protobuf runtime's map order.
        assert len(record) == len(original)
        assert record == tf_examples.serialize_in_order(example, WRITER_ORDER)


def test_records_parse_with_the_pretraining_spec():
    rng = np.random.default_rng(1)
    batch = _random_batch(rng, 20, 64, 10, 30522)
    input_ids, lengths, a_lengths, positions, labels, num_masked, is_random_next = batch
    encoder = pretraining_records.PretrainingRecordEncoder(64, 10, 30522)
    parsed = tf.io.parse_example(encoder.encode(*batch), schema.pretraining_feature_spec(64, 10))
    np.testing.assert_array_equal(parsed["input_ids"].numpy(), input_ids)
    np.testing.assert_array_equal(parsed["input_mask"].numpy().sum(axis=1), lengths)
    np.testing.assert_array_equal(parsed["masked_lm_positions"].numpy(), positions)
    np.testing.assert_array_equal(parsed["masked_lm_ids"].numpy(), labels)
    np.testing.assert_array_equal(parsed["masked_lm_weights"].numpy().sum(axis=1), num_masked)
    np.testing.assert_array_equal(parsed["next_sentence_labels"].numpy()[:, 0], is_random_next)
