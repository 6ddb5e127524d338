"""Benchmark: TFRecord CRC32C + framing and the pretraining record encoder against alternatives.

Runs `create_pretraining_data`'s worker (`ChunkProcessor`) on the first --num_chunks chunks of
WikiText-2 with the default flags, keeping each chunk's encoder inputs and records. Then, for
--rounds rounds, in an order rotated every round, it times per chunk (one record batch):
  * framing: `tfrecord_io.frame_records` (`google_crc32c`) against `tf.io.TFRecordWriter`
    writing the same records to a file in a temporary folder (tmpfs where there is one);
  * encoding: `PretrainingRecordEncoder.encode` against building `tf.train.Example`s from the
    same arrays and `SerializeToString()` (map entries in the protobuf runtime's hash order,
    which changes from process to process) or `SerializeToString(deterministic=True)` (keys
    sorted);
  * the whole worker, `ChunkProcessor.process`, whose time the framing and encoding are part of
    (its word cache is warm after the first round, as in a long run).
It checks that every framing gives the same bytes as TensorFlow's writer and that the encoders'
records are equal messages, and prints microseconds per record (median, range), the ratios of
the medians and the time `import tensorflow` takes.

    .venv/bin/python -m bench.data.tfrecord_crc --rounds=7 --num_chunks=3
"""
from __future__ import annotations

from importlib import metadata
import os
import pathlib
import statistics
import tempfile
import time
from typing import Callable

from absl import flags
import google_crc32c
import numpy as np

from bench.support import SHARED, machine_description, shared_data_dir
from data import tfrecord_schema as schema
from data.pretraining import chunks, corpus, instances, tfrecord_io, writer
from utils import entry_point

FLAGS = flags.FLAGS


def define_flags() -> None:
    """The benchmark's flags, defined where it runs as the main module (bench/support.py)."""
    flags.DEFINE_string("corpus", os.path.join(shared_data_dir(), "wikitext-2-raw",
                                               "wiki.test.sentences.txt"),
                        "One sentence a line, documents separated by blank lines.")
    flags.DEFINE_string("vocab_file", str(SHARED / "fixtures" / "vocab" / "uncased_vocab.txt"),
                        "WordPiece vocabulary.")
    flags.DEFINE_integer("num_chunks", 3, "Corpus chunks (record batches) per round.")
    flags.DEFINE_integer("rounds", 7, "Rounds; each times every candidate once.")


class _RecordingEncoder:
    """Passes `encode` calls to the real encoder and keeps their arguments."""

    def __init__(self, encoder):
        self.encoder = encoder
        self.batches: list[tuple] = []

    def encode(self, *arrays):
        self.batches.append(arrays)
        return self.encoder.encode(*arrays)


def _tf_writer(tf, path: str) -> Callable:
    def write(records):
        with tf.io.TFRecordWriter(path) as writer:
            for record in records:
                writer.write(record)
    return write


def _tf_examples(tf, deterministic: bool) -> Callable:
    """Encodes an encoder batch as `tf.train.Example`s with TensorFlow's protobuf classes."""
    int64s, floats, feature = tf.train.Int64List, tf.train.FloatList, tf.train.Feature

    def encode(input_ids, lengths, a_lengths, positions, ids, num_masked, is_random_next):
        position = np.arange(input_ids.shape[1])[None, :]
        real = position < lengths[:, None]
        segment_ids = real & (position >= a_lengths[:, None] + 2)
        weights = np.arange(positions.shape[1])[None, :] < num_masked[:, None]
        records = []
        for row in zip(input_ids.tolist(), real.astype(int).tolist(),
                       segment_ids.astype(int).tolist(), positions.tolist(), ids.tolist(),
                       weights.astype(float).tolist(), is_random_next.astype(int).tolist()):
            features = {key: feature(int64_list=int64s(value=values)) for key, values in zip(
                (schema.INPUT_IDS, schema.INPUT_MASK, schema.SEGMENT_IDS,
                 schema.MASKED_LM_POSITIONS, schema.MASKED_LM_IDS), row)}
            features[schema.MASKED_LM_WEIGHTS] = feature(float_list=floats(value=row[5]))
            features[schema.NEXT_SENTENCE_LABELS] = feature(int64_list=int64s(value=[row[6]]))
            example = tf.train.Example(features=tf.train.Features(feature=features))
            records.append(example.SerializeToString(deterministic=deterministic))
        return records
    return encode


def _prepare():
    """The chunks, their encoder batches and records, and a processor to rerun them."""
    settings = chunks.ChunkSettings(FLAGS.vocab_file, True, instances.PretrainingConfig(), 12345)
    processor = chunks.ChunkProcessor(settings)
    recorder = _RecordingEncoder(processor._encoder)
    processor._encoder = recorder
    options = writer.WriterOptions()
    corpus_chunks, batches, records = [], [], []
    for chunk in corpus.iter_chunks([FLAGS.corpus], options.chunk_bytes,
                                    options.min_chunk_documents, corpus.ReadCounts()):
        recorder.batches = []
        result = processor.process(chunk)
        corpus_chunks.append(chunk)
        batches.append(recorder.batches)
        records.append([framed[12:-4] for framed in result.records])
        if len(corpus_chunks) == FLAGS.num_chunks:
            break
    processor._encoder = recorder.encoder
    return processor, corpus_chunks, batches, records


def _check(tf, framings: dict, encoders: dict, batches, records, path: str) -> None:
    """Every framing writes TensorFlow's bytes; every encoder's records parse to the same."""
    for chunk_records in records:
        framings["tf.io.TFRecordWriter"](chunk_records)
        expected = pathlib.Path(path).read_bytes()
        for name, frame in framings.items():
            if name != "tf.io.TFRecordWriter":
                assert frame(chunk_records)[0] == expected, name
    parse = tf.train.Example.FromString
    all_batches = [batch for chunk_batches in batches for batch in chunk_batches]
    ours = [r for batch in all_batches for r in encoders["PretrainingRecordEncoder"](*batch)]
    for name in ("tf.train.Example", "tf.train.Example deterministic"):
        theirs = [r for batch in all_batches for r in encoders[name](*batch)]
        same_bytes = sum(a == b for a, b in zip(ours, theirs))
        assert all(parse(a) == parse(b) for a, b in zip(ours, theirs)), name
        canonical = all(parse(a).SerializeToString(deterministic=True) == b
                        for a, b in zip(ours, theirs)) if "deterministic" in name else None
        print(f"{name}: {len(ours)} records, all equal messages to PretrainingRecordEncoder's; "
              f"{same_bytes} byte-identical" + (
                  "" if canonical is None else f"; equal to ours re-serialized with sorted keys: "
                  f"{canonical}"))


def _timed(function: Callable, arguments: list[tuple]) -> float:
    start = time.perf_counter()
    for argument in arguments:
        function(*argument)
    return time.perf_counter() - start


def _print_group(title: str, times: dict[str, list[float]], num_records: int,
                 worker: float) -> None:
    """Prints microseconds per record, the ratios to the group's first candidate (the one the
    worker uses) and what each would add to the worker's `worker` microseconds per record."""
    print(title)
    medians = {name: 1e6 * statistics.median(t) / num_records for name, t in times.items()}
    first = next(iter(medians.values()))
    for name, seconds in times.items():
        low, high = 1e6 * min(seconds) / num_records, 1e6 * max(seconds) / num_records
        print(f"  {name:31s} {medians[name]:6.2f} us/record (range {low:.2f}-{high:.2f}), "
              f"{medians[name] / first:5.2f}x the first, {100 * medians[name] / worker:5.1f}% of "
              f"the worker's time, which it would change by "
              f"{100 * (medians[name] - first) / worker:+.1f}%")


def main(argv: list[str]) -> None:
    del argv
    print("machine:", machine_description())
    print(f"google-crc32c {metadata.version('google-crc32c')}, implementation "
          f"{google_crc32c.implementation!r}")
    start = time.perf_counter()
    import tensorflow as tf
    print(f"import tensorflow: {time.perf_counter() - start:.2f} s (each worker process would "
          "pay it to use tf.train.Example)")

    processor, corpus_chunks, batches, records = _prepare()
    num_records = sum(map(len, records))
    print(f"{len(corpus_chunks)} chunks, {num_records} records, "
          f"{np.mean([len(r) for rs in records for r in rs]):.0f} bytes a record on average")
    with tempfile.TemporaryDirectory(dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as d:
        path = os.path.join(d, "records.tfrecord")
        framings = {"frame_records (google_crc32c)": tfrecord_io.frame_records}
        framings["tf.io.TFRecordWriter"] = _tf_writer(tf, path)
        encoders = {"PretrainingRecordEncoder": processor._encoder.encode,
                    "tf.train.Example": _tf_examples(tf, False),
                    "tf.train.Example deterministic": _tf_examples(tf, True)}
        _check(tf, framings, encoders, batches, records, path)
        candidates = [(name, frame, [(r,) for r in records]) for name, frame in framings.items()]
        candidates += [(name, encode, [b for bs in batches for b in bs])
                       for name, encode in encoders.items()]
        candidates.append(("ChunkProcessor.process", processor.process,
                           [(c,) for c in corpus_chunks]))
        times: dict[str, list[float]] = {name: [] for name, _, _ in candidates}
        for round_index in range(FLAGS.rounds):
            shift = round_index % len(candidates)
            for name, function, arguments in candidates[shift:] + candidates[:shift]:
                times[name].append(_timed(function, arguments))
    worker = 1e6 * statistics.median(times["ChunkProcessor.process"]) / num_records
    print(f"whole worker: ChunkProcessor.process {worker:.2f} us/record (range "
          f"{1e6 * min(times['ChunkProcessor.process']) / num_records:.2f}-"
          f"{1e6 * max(times['ChunkProcessor.process']) / num_records:.2f}), over "
          f"{FLAGS.rounds} rounds")
    _print_group("CRC32C + framing", {n: times[n] for n in framings}, num_records, worker)
    _print_group("tf.train.Example encoding", {n: times[n] for n in encoders}, num_records,
                 worker)


if __name__ == "__main__":
    define_flags()
    entry_point.run(main)
