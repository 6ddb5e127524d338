"""`tf.train.Example`s built from plain values with TensorFlow's own protobuf classes."""
from typing import Mapping, Sequence

import numpy as np
import tensorflow as tf


def feature(values: Sequence[int] | Sequence[float] | np.ndarray) -> tf.train.Feature:
    """A `float_list` for float values (a float dtype or any Python float), else an
    `int64_list`."""
    if len(values) and np.asarray(values).dtype.kind == "f":
        return tf.train.Feature(float_list=tf.train.FloatList(value=[float(v) for v in values]))
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))


def example(values: Mapping[str, Sequence[int] | Sequence[float] | np.ndarray]
            ) -> tf.train.Example:
    """The `tf.train.Example` holding each key's values as a `feature`."""
    return tf.train.Example(features=tf.train.Features(
        feature={key: feature(key_values) for key, key_values in values.items()}))


def serialize_in_order(record: tf.train.Example, keys: Sequence[str]) -> bytes:
    """`record` serialized by protobuf, with its feature map entries in the order of `keys`.

    Protobuf writes each map entry the same way whatever the map order, so the record is the
    Example's header followed by the single-entry serializations of its features, one per key.
    """
    features = record.features.feature
    assert sorted(keys) == sorted(features.keys())
    body = b"".join(tf.train.Features(feature={key: features[key]}).SerializeToString()
                    for key in keys)
    whole = record.SerializeToString()
    serialized = whole[:len(whole) - len(body)] + body
    assert tf.train.Example.FromString(serialized) == record
    return serialized
