"""TFRecord feature keys, parsing specs and the `tf.train.Example` wire encoding of BERT records.

The keys are the original scripts' (and the model's input keys). The wire-format helpers write a
serialized `tf.train.Example`'s map entries from already packed values; the pretraining record
encoder (`data/pretraining/records.py`) joins them in the original writer's order, so equal inputs
give equal bytes in every process (the protobuf runtime's own map order varies between processes).

TensorFlow is imported on first use only: the data-preparation worker processes need the keys and
the wire encoding, and stay light without it.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

from utils.encoder_inputs import ENCODER_INPUTS, INPUT_IDS, INPUT_MASK, SEGMENT_IDS  # noqa: F401

MASKED_LM_POSITIONS = "masked_lm_positions"
MASKED_LM_IDS = "masked_lm_ids"
MASKED_LM_WEIGHTS = "masked_lm_weights"
NEXT_SENTENCE_LABELS = "next_sentence_labels"
START_POSITIONS = "start_positions"
END_POSITIONS = "end_positions"
UNIQUE_IDS = "unique_ids"

INT64 = "int64"
FLOAT = "float"


@dataclasses.dataclass(frozen=True)
class FeatureField:
    """One fixed-length feature of a record.

    Attributes:
      key: feature name in the `tf.train.Example`.
      dtype: `INT64` (an `int64_list`) or `FLOAT` (a `float_list`).
      length: number of values; 0 means a scalar feature parsed with shape [].
    """

    key: str
    dtype: str
    length: int

    @property
    def num_values(self) -> int:
        """Number of values stored in the record (1 for a scalar)."""
        return max(self.length, 1)


def pretraining_fields(max_seq_length: int,
                       max_predictions_per_seq: int) -> tuple[FeatureField, ...]:
    """The seven features of a pretraining record, in the original writer's order."""
    return (
        FeatureField(INPUT_IDS, INT64, max_seq_length),
        FeatureField(INPUT_MASK, INT64, max_seq_length),
        FeatureField(SEGMENT_IDS, INT64, max_seq_length),
        FeatureField(MASKED_LM_POSITIONS, INT64, max_predictions_per_seq),
        FeatureField(MASKED_LM_IDS, INT64, max_predictions_per_seq),
        FeatureField(MASKED_LM_WEIGHTS, FLOAT, max_predictions_per_seq),
        FeatureField(NEXT_SENTENCE_LABELS, INT64, 1),
    )


def feature_spec(fields: Sequence[FeatureField]) -> dict[str, Any]:
    """Maps each field to a `tf.io.FixedLenFeature` for `tf.io.parse_example`."""
    import tensorflow as tf

    dtypes = {INT64: tf.int64, FLOAT: tf.float32}
    return {field.key: tf.io.FixedLenFeature([field.length] if field.length else [],
                                             dtypes[field.dtype])
            for field in fields}


def pretraining_feature_spec(max_seq_length: int, max_predictions_per_seq: int) -> dict[str, Any]:
    """Parsing spec of the pretraining records (the original `run_pretraining.py` spec)."""
    return feature_spec(pretraining_fields(max_seq_length, max_predictions_per_seq))


def encode_varint(value: int) -> bytes:
    """Protobuf base-128 varint; a negative int64 takes its 64-bit two's complement."""
    value &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _length_delimited(tag: bytes, payload: bytes) -> bytes:
    return tag + encode_varint(len(payload)) + payload


def feature_entry_prefix(key: str) -> bytes:
    """Wire bytes of a `Features.feature` map entry's key, up to the value's tag."""
    return _length_delimited(b"\x0a", key.encode("utf-8")) + b"\x12"


def encode_int64_entry(prefix: bytes, packed_varints: bytes) -> bytes:
    """A map entry holding an `int64_list` of already varint-packed values."""
    int64_list = _length_delimited(b"\x0a", packed_varints)
    feature = _length_delimited(b"\x1a", int64_list)
    return _length_delimited(b"\x0a", prefix + encode_varint(len(feature)) + feature)


def encode_float_entry(prefix: bytes, packed_floats: bytes) -> bytes:
    """A map entry holding a `float_list` of already packed little-endian float32 values."""
    float_list = _length_delimited(b"\x0a", packed_floats)
    feature = _length_delimited(b"\x12", float_list)
    return _length_delimited(b"\x0a", prefix + encode_varint(len(feature)) + feature)


def check_example_fields(features: Mapping[str, Any], fields: Sequence[FeatureField],
                         source: str) -> None:
    """Checks a parsed `tf.train.Example.features.feature` map against `fields`.

    Args:
      features: the `feature` map of a `tf.train.Example`.
      fields: the expected features.
      source: what to name in errors (file name and record number).

    Raises:
      ValueError: a key is missing, holds the wrong list kind, or the wrong number of values.
    """
    for field in fields:
        if field.key not in features:
            raise ValueError(f"{source}: feature '{field.key}' is missing "
                             f"(found: {', '.join(sorted(features.keys())) or 'none'})")
        feature = features[field.key]
        kind = "float_list" if field.dtype == FLOAT else "int64_list"
        if feature.WhichOneof("kind") != kind:
            raise ValueError(f"{source}: feature '{field.key}' holds "
                             f"{feature.WhichOneof('kind')}, expected {kind}")
        count = len(getattr(feature, kind).value)
        if count != field.num_values:
            raise ValueError(f"{source}: feature '{field.key}' has {count} values, "
                             f"expected {field.num_values}")
