"""Tests of data/tfrecord_schema.py against the original's TFRecord and TensorFlow's protobufs."""
import numpy as np
import pytest
import tensorflow as tf

from data import tfrecord_schema as schema
from tests.support import tf_examples

PRETRAINING_ORDER = ["input_ids", "input_mask", "segment_ids", "masked_lm_positions",
                     "masked_lm_ids", "masked_lm_weights", "next_sentence_labels"]


def _original_records(fixtures_dir):
    path = fixtures_dir / "pretraining_data" / "original_wwm_false.tfrecord"
    return [record.numpy() for record in tf.data.TFRecordDataset(str(path))]


def test_pretraining_fields_are_the_original_keys_in_its_order():
    fields = schema.pretraining_fields(128, 20)
    assert [field.key for field in fields] == PRETRAINING_ORDER
    assert [field.length for field in fields] == [128, 128, 128, 20, 20, 20, 1]
    assert [field.dtype for field in fields] == ["int64"] * 5 + ["float", "int64"]


def test_the_model_input_keys_are_the_original_record_keys():
    assert schema.ENCODER_INPUTS == ("input_ids", "input_mask", "segment_ids")
    assert [field.key for field in schema.pretraining_fields(8, 2)][:3] == list(
        schema.ENCODER_INPUTS)


def test_feature_spec_matches_the_original_reader():
    spec = schema.pretraining_feature_spec(64, 10)
    assert spec["input_ids"] == tf.io.FixedLenFeature([64], tf.int64)
    assert spec["masked_lm_weights"] == tf.io.FixedLenFeature([10], tf.float32)
    assert spec["next_sentence_labels"] == tf.io.FixedLenFeature([1], tf.int64)


def test_original_tfrecord_has_the_pretraining_fields(fixtures_dir):
    records = _original_records(fixtures_dir)
    assert len(records) == 60
    for index, record in enumerate(records):
        example = tf.train.Example.FromString(record)
        schema.check_example_fields(example.features.feature, schema.pretraining_fields(128, 20),
                                    f"record {index}")


def test_wire_entries_equal_tensorflow_features_on_edge_values():
    values = {"big": [0, 1, 127, 128, 16383, 16384, 2**31, 2**63 - 1],
              "negative": [-1, -(2**63), -300],
              "floats": np.array([0.0, -1.5, 3.25e-8, 1e30], np.float32),
              "empty": [],
              "unicode_ключ": [7]}
    entries = {}
    for key, key_values in values.items():
        prefix = schema.feature_entry_prefix(key)
        if key == "floats":
            entries[key] = schema.encode_float_entry(prefix, key_values.astype("<f4").tobytes())
        else:
            entries[key] = schema.encode_int64_entry(prefix, b"".join(
                schema.encode_varint(value) for value in key_values))
    # A `Features` message on the wire is its map entries one after the other.
    parsed = tf.train.Features.FromString(b"".join(entries.values()))
    assert parsed == tf_examples.example(values).features
    assert list(parsed.feature["negative"].int64_list.value) == [-1, -(2**63), -300]
    for key in ("big", "negative", "floats", "unicode_ключ"):
        single = tf.train.Features(feature={key: tf_examples.feature(values[key])})
        assert entries[key] == single.SerializeToString()


def test_encode_varint_known_values():
    assert schema.encode_varint(0) == b"\x00"
    assert schema.encode_varint(1) == b"\x01"
    assert schema.encode_varint(300) == b"\xac\x02"
    assert schema.encode_varint(-1) == b"\xff" * 9 + b"\x01"


def test_check_example_fields_names_the_key():
    fields = schema.pretraining_fields(8, 2)
    values = {field.key: [0] * field.num_values for field in fields}
    values["masked_lm_weights"] = [1.0, 0.0]
    good = tf_examples.example(values).features.feature
    schema.check_example_fields(good, fields, "f.tfrecord record 0")
    missing = dict(values)
    del missing["segment_ids"]
    with pytest.raises(ValueError, match=r"f.tfrecord.*'segment_ids' is missing"):
        schema.check_example_fields(tf_examples.example(missing).features.feature, fields,
                                    "f.tfrecord record 0")
    short = dict(values, input_ids=[0] * 7)
    with pytest.raises(ValueError, match=r"'input_ids' has 7 values, expected 8"):
        schema.check_example_fields(tf_examples.example(short).features.feature, fields, "f")
    wrong_kind = dict(values, masked_lm_weights=[1, 0])
    with pytest.raises(ValueError, match=r"'masked_lm_weights' holds int64_list"):
        schema.check_example_fields(tf_examples.example(wrong_kind).features.feature, fields,
                                    "f")
