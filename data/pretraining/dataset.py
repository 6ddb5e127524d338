"""tf.data input of pretraining TFRecords (the original `run_pretraining.py` input_fn).

Training: the files are shuffled (seeded), read several at a time with a deterministic parallel
interleave, shuffled again record by record (seeded), repeated, batched with
`drop_remainder=True`, parsed and prefetched. Evaluation: the files in order, either repeated
endlessly in full batches (`repeat=True`: the original's eval input, which wraps around to the
first record after the last; the caller takes the steps it wants) or once, with a last partial
batch. Every stage is checkpointable, so `tf.train.Checkpoint(iterator=...)` resumes the
exact stream. Records are checked before training starts: the first record of each file must
hold the seven pretraining features with the expected lengths. A damaged record met later
(`damaged_records_named`) is reported with its file and index.
"""
from __future__ import annotations

import contextlib
import re
from typing import Iterator, Sequence

import tensorflow as tf

from data import tfrecord_schema as schema

# Files read at once by the training interleave (the original read 4 with 4 CPU threads).
_CYCLE_LENGTH = 4


def expand_file_patterns(input_patterns: str | Sequence[str]) -> list[str]:
    """Files of comma-separated paths or globs, each pattern's matches sorted.

    Raises:
      ValueError: a pattern matches no file.
    """
    if isinstance(input_patterns, str):
        input_patterns = [input_patterns]
    files = []
    for pattern in (p.strip() for item in input_patterns for p in item.split(",")):
        if not pattern:
            continue
        matches = sorted(tf.io.gfile.glob(pattern))
        if not matches:
            raise ValueError(f"input pattern {pattern!r} matches no file")
        files.extend(matches)
    if not files:
        raise ValueError(f"no input file given ({input_patterns!r})")
    return files


def check_pretraining_files(files: Sequence[str], max_seq_length: int,
                            max_predictions_per_seq: int) -> None:
    """Checks the first record of each file against the pretraining schema.

    Raises:
      ValueError: naming the file (and the feature) of a record that is not a pretraining
        example of these lengths, of a file that is not a TFRecord file, or saying that no
        file holds a record.
    """
    fields = schema.pretraining_fields(max_seq_length, max_predictions_per_seq)
    any_record = False
    for path in files:
        try:
            first = next(iter(tf.data.TFRecordDataset(path).take(1)), None)
        except (tf.errors.DataLossError, tf.errors.OpError) as error:
            raise ValueError(f"{path}: not a readable TFRecord file ({error.message})") from error
        if first is None:
            continue
        any_record = True
        try:
            example = tf.train.Example.FromString(first.numpy())
        except Exception as error:  # protobuf's DecodeError is not exported by TensorFlow
            raise ValueError(f"{path}: first record is not a tf.train.Example") from error
        _check_lengths(example.features.feature, path, max_seq_length, max_predictions_per_seq)
        schema.check_example_fields(example.features.feature, fields, f"{path}, first record")
    if not any_record:
        raise ValueError(f"no record in {', '.join(files)}")


def _check_lengths(features, path: str, max_seq_length: int, max_predictions_per_seq: int) -> None:
    """Names the flags whose lengths differ from those the records were written with."""
    written = {flag: len(features[name].int64_list.value)
               for flag, name in (("max_seq_length", schema.INPUT_IDS),
                                  ("max_predictions_per_seq", "masked_lm_positions"))
               if name in features}
    given = {"max_seq_length": max_seq_length, "max_predictions_per_seq": max_predictions_per_seq}
    wrong = [flag for flag, length in written.items() if length != given[flag]]
    if wrong:
        raise ValueError(f"{path}: the records were written with " + " and ".join(
            f"--{flag}={written[flag]}" for flag in wrong) + ", this run has " + " and ".join(
            f"--{flag}={given[flag]}" for flag in wrong) + ": pass the lengths "
            "create_pretraining_data.py wrote them with")


@contextlib.contextmanager
def damaged_records_named(input_patterns: str | Sequence[str]) -> Iterator[None]:
    """Turns TensorFlow's DataLossError on a truncated or corrupted record, which gives a byte
    offset but no file, into a ValueError naming the file, the record's index and its offset."""
    try:
        yield
    except tf.errors.DataLossError as error:
        damage = _DAMAGE.search(error.message)
        what = damage.group(0) if damage else error.message
        for path in expand_file_patterns(input_patterns):
            readable = _readable_records(path)
            if readable is not None:
                raise ValueError(f"{path}: record {readable} (after {readable} readable ones) is "
                                 f"damaged: {what}; the file is truncated or corrupt (an "
                                 "interrupted copy?)") from None
        raise ValueError(f"a damaged record in {input_patterns}: {what}") from None


# TensorFlow's words for a damaged record: "truncated record at 19476", "corrupted record at 47".
_DAMAGE = re.compile(r"(truncated|corrupted) record at \d+")


def _readable_records(path: str) -> int | None:
    """How many records of `path` read cleanly before a damaged one; None if none is damaged."""
    count = 0
    try:
        for _ in tf.data.TFRecordDataset(path):
            count += 1
    except tf.errors.DataLossError:
        return count
    return None


def count_records(input_patterns: str | Sequence[str], limit: int | None = None) -> int:
    """Records in the files (without parsing them), counting no further than `limit`."""
    dataset = tf.data.TFRecordDataset(expand_file_patterns(input_patterns))
    if limit is not None:
        dataset = dataset.take(limit)
    return int(dataset.reduce(tf.constant(0, tf.int64), lambda count, _: count + 1))


def _decoder(max_seq_length: int, max_predictions_per_seq: int):
    spec = schema.pretraining_feature_spec(max_seq_length, max_predictions_per_seq)

    def decode(serialized: tf.Tensor) -> dict[str, tf.Tensor]:
        """[B] serialized Examples -> int32 features (float32 masked_lm_weights), [B, ...]."""
        features = tf.io.parse_example(serialized, spec)
        return {key: tf.cast(value, tf.int32) if value.dtype == tf.int64 else value
                for key, value in features.items()}

    return decode


def pretraining_dataset(input_patterns: str | Sequence[str], batch_size: int,
                        max_seq_length: int, max_predictions_per_seq: int, is_training: bool,
                        seed: int | None = None,
                        input_context: tf.distribute.InputContext | None = None,
                        shuffle_buffer_size: int = 100, repeat: bool = False) -> tf.data.Dataset:
    """Batches of pretraining features from TFRecord files.

    Args:
      input_patterns: comma-separated paths or globs (or a list of them).
      batch_size: examples per batch of this pipeline.
      max_seq_length: L, length of input_ids, input_mask and segment_ids.
      max_predictions_per_seq: P, length of the masked-LM features.
      is_training: shuffle, repeat and drop the last partial batch.
      seed: seed of both shuffles (None: a different order every run).
      input_context: with several input pipelines, this one reads its share: whole files when
        there are at least as many files as pipelines, every n-th record otherwise.
      shuffle_buffer_size: records in the record-level shuffle buffer (the original: 100).
      repeat: evaluation only (training always repeats): read the files in order again and
        again and keep full batches only, as the original's eval input; an endless dataset.

    Returns:
      A dataset of dicts: input_ids, input_mask, segment_ids [B, L] int32;
      masked_lm_positions, masked_lm_ids [B, P] int32; masked_lm_weights [B, P] float32;
      next_sentence_labels [B, 1] int32.
    """
    files = expand_file_patterns(input_patterns)
    check_pretraining_files(files, max_seq_length, max_predictions_per_seq)
    pipelines = input_context.num_input_pipelines if input_context else 1
    pipeline_id = input_context.input_pipeline_id if input_context else 0
    shard_records = pipelines > 1 and len(files) < pipelines
    if pipelines > 1 and not shard_records:
        files = files[pipeline_id::pipelines]
    if is_training:
        dataset = tf.data.Dataset.from_tensor_slices(files)
        dataset = dataset.shuffle(len(files), seed=seed).repeat()
        dataset = dataset.interleave(
            tf.data.TFRecordDataset, cycle_length=min(len(files), _CYCLE_LENGTH),
            num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    else:
        dataset = tf.data.TFRecordDataset(files)
        if repeat:
            dataset = dataset.repeat()
    if shard_records:
        dataset = dataset.shard(pipelines, pipeline_id)
    if is_training:
        dataset = dataset.shuffle(shuffle_buffer_size, seed=seed)
    dataset = dataset.batch(batch_size, drop_remainder=is_training or repeat)
    dataset = dataset.map(_decoder(max_seq_length, max_predictions_per_seq),
                          num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return dataset.prefetch(tf.data.AUTOTUNE)
