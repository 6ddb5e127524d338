"""The tf.data input of run_pretraining.py: pretraining TFRecords -> batches of model inputs.

Reads the files of `create_pretraining_data.py` and of the original script alike. Every file's first
record is checked against the expected schema before training starts, so a file written with other
lengths or keys fails at once, naming the file and the key.
"""
from __future__ import annotations

import glob

import tensorflow as tf

from data.tfrecord_schema import FLOAT, pretraining_feature_spec, pretraining_fields


def list_input_files(input_patterns: str) -> list[str]:
    """Expands a comma-separated list of files and globs; an empty match is an error."""
    files = []
    for pattern in filter(None, (p.strip() for p in input_patterns.split(","))):
        matches = sorted(glob.glob(pattern)) or sorted(tf.io.gfile.glob(pattern))
        if not matches:
            raise FileNotFoundError(f"--input_file pattern {pattern!r} matches no file")
        files.extend(matches)
    if not files:
        raise FileNotFoundError("--input_file names no file")
    return files


def check_schema(path: str, max_seq_length: int, max_predictions_per_seq: int) -> None:
    """Raises ValueError naming the file and key if the first record does not fit the flags."""
    first = next(iter(tf.data.TFRecordDataset(path).take(1)), None)
    if first is None:
        raise ValueError(f"{path}: the file holds no record")
    example = tf.train.Example.FromString(first.numpy())
    for field in pretraining_fields(max_seq_length, max_predictions_per_seq):
        if field.key not in example.features.feature:
            raise ValueError(f"{path}: records lack the feature {field.key!r}")
        feature = example.features.feature[field.key]
        values = feature.float_list.value if field.dtype == FLOAT else feature.int64_list.value
        if len(values) != field.num_values:
            raise ValueError(
                f"{path}: feature {field.key!r} has {len(values)} values, expected "
                f"{field.num_values} (check --max_seq_length and --max_predictions_per_seq)")


def _decode(record: tf.Tensor, spec: dict) -> dict[str, tf.Tensor]:
    example = tf.io.parse_single_example(record, spec)
    # int64 is not supported on TPUs and int32 is what the model takes.
    return {k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v for k, v in example.items()}


def pretraining_dataset(input_patterns: str, batch_size: int, max_seq_length: int,
                        max_predictions_per_seq: int, is_training: bool,
                        seed: int | None = None,
                        input_context: tf.distribute.InputContext | None = None
                        ) -> tf.data.Dataset:
    """Batches of the seven pretraining features (int32, `masked_lm_weights` float32).

    Training: files shuffled, read interleaved in parallel (deterministically), records shuffled,
    repeated forever, full batches only. Evaluation: files in order, once, the last batch smaller.

    Args:
        input_patterns: comma-separated files or globs.
        batch_size: examples per batch (per replica when the caller distributes).
        max_seq_length, max_predictions_per_seq: the lengths the files must have.
        is_training: training or evaluation order.
        seed: seed of the shuffles.
        input_context: shards the files across input pipelines when given.
    """
    files = list_input_files(input_patterns)
    for path in files:
        check_schema(path, max_seq_length, max_predictions_per_seq)
    spec = pretraining_feature_spec(max_seq_length, max_predictions_per_seq)
    dataset = tf.data.Dataset.from_tensor_slices(files)
    if input_context is not None and input_context.num_input_pipelines > 1:
        dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    if is_training:
        dataset = dataset.shuffle(len(files), seed=seed).repeat()
        dataset = dataset.interleave(tf.data.TFRecordDataset, cycle_length=min(len(files), 4),
                                     num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        dataset = dataset.shuffle(100, seed=seed)
    else:
        dataset = tf.data.TFRecordDataset(dataset)
    dataset = dataset.map(lambda record: _decode(record, spec),
                          num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    dataset = dataset.batch(batch_size, drop_remainder=is_training)
    return dataset.prefetch(tf.data.AUTOTUNE)
