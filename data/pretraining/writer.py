"""Streams a text corpus into pretraining TFRecord files, in parallel and in bounded memory.

The main process reads the corpus as chunks of documents (`pretraining_corpus`), hands them to
worker processes (`pretraining_chunks`: tokenize, pack, shuffle, mask, encode), takes their records
back in chunk order, mixes them across chunks in a seeded shuffle buffer and deals them
round-robin over the output files. At most `num_workers + 2` chunks are in flight, so memory
depends on the chunk and buffer sizes, never on the corpus size. Every random draw is seeded by
(random_seed, chunk index) or by random_seed alone, so the files are byte-identical for the same
inputs, seed and flags, whatever `num_workers` is.
"""
from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import logging
import multiprocessing
import os
import sys
import time
from typing import Callable, Iterator, Sequence

import numpy as np

from data.pretraining import chunks as pretraining_chunks, corpus as pretraining_corpus, tfrecord_io
from data.pretraining.summary import WriteSummary


@dataclasses.dataclass(frozen=True)
class WriterOptions:
    """How the work is spread and reported (none of it changes the output except as noted).

    Attributes:
      num_workers: worker processes; 0 or 1 works in this process.
      chunk_bytes: input bytes per chunk (changes the output: a chunk is the window random next
        sentences come from and the unit seeds are tied to).
      min_chunk_documents: documents per chunk at least (changes the output, as chunk_bytes).
      shuffle_buffer_size: instances held back to mix chunks (changes the output order).
      progress_interval_s: seconds between progress lines.
    """

    num_workers: int = 1
    chunk_bytes: int = 1 << 17
    min_chunk_documents: int = 16
    shuffle_buffer_size: int = 50_000
    progress_interval_s: float = 30.0

    def validate(self) -> None:
        """Raises ValueError naming the first out-of-range option."""
        if self.num_workers < 0:
            raise ValueError(f"num_workers={self.num_workers} must be >= 0")
        if self.chunk_bytes < 1:
            raise ValueError(f"chunk_bytes={self.chunk_bytes} must be >= 1")
        if self.min_chunk_documents < 1:
            raise ValueError(f"min_chunk_documents={self.min_chunk_documents} must be >= 1")
        if self.shuffle_buffer_size < 0:
            raise ValueError(f"shuffle_buffer_size={self.shuffle_buffer_size} must be >= 0")


class ShuffleBuffer:
    """Mixes records over a window of `capacity`: each new record takes the place of a uniformly
    chosen held one, which leaves (the shuffle buffer of tf.data)."""

    def __init__(self, capacity: int, rng: np.random.Generator):
        self.capacity = capacity
        self._rng = rng
        self._records: list[bytes] = []

    def add(self, records: list[bytes]) -> list[bytes]:
        """Adds `records`; returns the records that leave the buffer."""
        if self.capacity == 0:
            return list(records)
        room = max(self.capacity - len(self._records), 0)
        self._records.extend(records[:room])
        incoming = records[room:]
        if not incoming:
            return []
        held = self._records
        released = []
        slots = self._rng.integers(0, len(held), len(incoming)).tolist()
        for record, slot in zip(incoming, slots):
            released.append(held[slot])
            held[slot] = record
        return released

    def drain(self) -> list[bytes]:
        """Returns every remaining record, in random order."""
        held, self._records = self._records, []
        return [held[i] for i in self._rng.permutation(len(held)).tolist()]


# The longest wait for a chunk given out to a worker when the run stops midway.
_FINISH_TIMEOUT_S = 60.0


def _map_chunks(chunks: Iterator[pretraining_corpus.CorpusChunk],
                settings: pretraining_chunks.ChunkSettings,
                num_workers: int) -> Iterator[pretraining_chunks.ChunkResult]:
    """Processes chunks in worker processes; yields results in chunk order."""
    if num_workers <= 1:
        processor = pretraining_chunks.ChunkProcessor(settings)
        for chunk in chunks:
            yield processor.process(chunk)
        return
    # Forked workers start at once with the parent's modules; TensorFlow's threads would not
    # survive a fork, so a parent that has loaded it spawns fresh interpreters instead.
    context = multiprocessing.get_context("spawn" if "tensorflow" in sys.modules else "fork")
    with context.Pool(num_workers, initializer=pretraining_chunks.init_worker,
                      initargs=(settings,)) as pool:
        in_flight: collections.deque = collections.deque()
        try:
            for chunk in chunks:
                in_flight.append(pool.apply_async(pretraining_chunks.process_chunk_in_worker,
                                                  (chunk,)))
                if len(in_flight) >= num_workers + 2:
                    yield in_flight.popleft().get()
            while in_flight:
                yield in_flight.popleft().get()
        finally:
            # Stopped midway (an error, SIGTERM, Ctrl-C): the few chunks given out are finished
            # before the pool ends its workers, since a worker ended while it sends a result
            # would leave the result queue's lock held and the pool's shutdown waiting forever.
            for result in in_flight:
                result.wait(_FINISH_TIMEOUT_S)


class _RoundRobinFiles:
    """Deals records over atomic output files, the original writer's record i -> file i % n.

    The writes run in a background thread (file writes release the GIL), so the main process
    keeps feeding the workers while the kernel copies data; at most `_PENDING_WRITES` batches
    wait, which bounds the memory they hold.
    """

    _PENDING_WRITES = 4

    def __init__(self, paths: Sequence[str]):
        self.files: list[tfrecord_io.AtomicRecordFile] = []
        self.num_written = 0
        self._writer = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        self._pending: collections.deque = collections.deque()
        try:
            for path in paths:
                self.files.append(tfrecord_io.AtomicRecordFile(path))
        except BaseException:
            self.abort()
            raise

    def write(self, records: list[bytes]) -> None:
        count = len(self.files)
        for offset, output in enumerate(self.files):
            share = records[(offset - self.num_written) % count::count]
            self._pending.append(self._writer.submit(output.write_framed, share))
        self.num_written += len(records)
        while len(self._pending) > self._PENDING_WRITES * count:
            self._pending.popleft().result()  # raises the write's error, if any

    def _wait(self) -> None:
        while self._pending:
            self._pending.popleft().result()

    def commit(self) -> None:
        self._wait()
        self._writer.shutdown()
        for output in self.files:
            output.commit()

    def abort(self) -> None:
        try:
            self._wait()
        except OSError:
            pass  # the files are removed below anyway
        finally:
            self._writer.shutdown()
            for output in self.files:
                output.abort()


def _remove_stale_temporary_files(output_files: Sequence[str],
                                  log: Callable[[str], None]) -> None:
    """Deletes what killed runs writing these files left, and says what it deleted or kept."""
    for path in output_files:
        removed, kept = tfrecord_io.remove_stale_temporary_files(path)
        for temporary in removed:
            log(f"Removed {temporary}: a temporary file of {path} left by a run that was "
                "stopped before it finished (its process is gone)")
        for temporary in kept:
            log(f"Kept {temporary}: a temporary file of {path} whose run may still be going "
                "(its process is alive or on another host)")


def write_pretraining_records(input_files: Sequence[str], output_files: Sequence[str],
                              settings: pretraining_chunks.ChunkSettings,
                              options: WriterOptions,
                              log: Callable[[str], None] = logging.getLogger(__name__).info
                              ) -> WriteSummary:
    """Writes the pretraining records of `input_files` to `output_files`.

    The sampling settings and options are checked first; the caller checks the paths and the
    vocabulary (`create_pretraining_data.py` does). Nothing is written under a final name before
    every record is written; on an error this run's temporary files are removed. Temporary files
    of the same outputs that killed runs left behind are removed first, and logged.

    Args:
      input_files: text files, read in this order.
      output_files: TFRecord files, filled round-robin.
      settings: vocabulary, casing, sampling flags and seed.
      options: parallelism, chunking, mixing and progress reporting.
      log: receives progress lines.

    Returns:
      What was read, skipped and written.

    Raises:
      ValueError: a setting or option is out of range.
    """
    settings.config.validate()
    options.validate()
    counts = pretraining_corpus.ReadCounts()
    summary = WriteSummary(list(output_files), [0] * len(output_files),
                           total_input_bytes=sum(os.path.getsize(p) for p in input_files))
    chunks = pretraining_corpus.iter_chunks(input_files, options.chunk_bytes,
                                            options.min_chunk_documents, counts)
    buffer = ShuffleBuffer(options.shuffle_buffer_size, np.random.default_rng(
        np.random.SeedSequence([settings.random_seed % (1 << 64), 1 << 32])))
    _remove_stale_temporary_files(output_files, log)
    outputs = _RoundRobinFiles(output_files)
    start = last_report = time.monotonic()
    results = _map_chunks(chunks, settings, options.num_workers)
    try:
        for result in results:
            summary.add_chunk(result)
            outputs.write(buffer.add(result.records))
            summary.instances_written = outputs.num_written
            now = time.monotonic()
            if now - last_report >= options.progress_interval_s:
                log(summary.progress_line(counts, now - start))
                last_report = now
        outputs.write(buffer.drain())
        outputs.commit()
    except BaseException:
        try:
            results.close()  # the worker processes end before the error goes up
        finally:
            outputs.abort()
        raise
    summary.finish(counts, [output.num_records for output in outputs.files],
                   time.monotonic() - start)
    return summary
