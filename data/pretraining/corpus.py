"""Streams a pretraining corpus as chunks of documents.

The input format is the original's: one sentence per line, a blank line between documents.
Lines end at b"\\n" only (as the original's `readline`), are decoded as UTF-8 with undecodable
bytes dropped (the original's `convert_to_unicode`) and stripped. Unlike the original, the end of
a file also ends a document.

A chunk closes after the first document that brings it to `chunk_bytes` of text and at least
`min_chunk_documents` documents, or to `MAX_CHUNK_FACTOR * chunk_bytes` whatever its number of
documents (which bounds memory on corpora of very long documents); a remainder of fewer
documents at the end joins the last chunk. So chunk boundaries depend on the input alone. A
chunk is the unit of work of the parallel writer and the window random next sentences are
drawn from.
"""
from __future__ import annotations

import dataclasses
import glob
import os
from typing import Iterator, Sequence

# A chunk of this many times `chunk_bytes` closes even with fewer than `min_chunk_documents`.
MAX_CHUNK_FACTOR = 16


@dataclasses.dataclass
class CorpusChunk:
    """Consecutive documents of the corpus.

    Attributes:
      index: position of the chunk in the corpus (0-based).
      documents: each document's non-blank, stripped lines.
      num_bytes: bytes of input the chunk was read from (blank lines included).
    """

    index: int
    documents: list[list[str]]
    num_bytes: int


@dataclasses.dataclass
class ReadCounts:
    """What the reader has seen so far."""

    bytes_read: int = 0
    lines: int = 0
    blank_lines: int = 0
    invalid_utf8_lines: int = 0
    documents: int = 0


def expand_input_patterns(patterns: str | Sequence[str]) -> list[str]:
    """Files named by comma-separated paths or globs, in order (each glob sorted).

    Raises:
      ValueError: a glob matches nothing, or a named file does not exist or is not a file.
    """
    if isinstance(patterns, str):
        patterns = [patterns]
    paths = []
    for pattern in (p.strip() for item in patterns for p in item.split(",")):
        if not pattern:
            continue
        if glob.has_magic(pattern):
            matches = sorted(path for path in glob.glob(pattern) if os.path.isfile(path))
            if not matches:
                raise ValueError(f"input pattern {pattern!r} matches no file")
            paths.extend(matches)
        elif os.path.isfile(pattern):
            paths.append(pattern)
        else:
            raise ValueError(f"input file {pattern!r} does not exist or is not a file")
    if not paths:
        raise ValueError(f"no input file given ({patterns!r})")
    return paths


def _decode(raw_line: bytes, counts: ReadCounts) -> str:
    try:
        return raw_line.decode("utf-8")
    except UnicodeDecodeError:
        counts.invalid_utf8_lines += 1
        return raw_line.decode("utf-8", "ignore")


def iter_documents(paths: Sequence[str], counts: ReadCounts) -> Iterator[tuple[list[str], int]]:
    """Yields (stripped non-blank lines, bytes read) per document, updating `counts`."""
    for path in paths:
        lines: list[str] = []
        num_bytes = 0
        with open(path, "rb") as reader:
            for raw_line in reader:
                counts.lines += 1
                num_bytes += len(raw_line)
                line = _decode(raw_line, counts).strip()
                if line:
                    lines.append(line)
                    continue
                counts.blank_lines += 1
                if lines:
                    counts.documents += 1
                    yield lines, num_bytes
                    lines, num_bytes = [], 0
        if lines:
            counts.documents += 1
            yield lines, num_bytes
        elif num_bytes:
            # Trailing blank lines of a file are accounted to the last chunk read.
            yield [], num_bytes


def iter_chunks(paths: Sequence[str], chunk_bytes: int, min_chunk_documents: int,
                counts: ReadCounts) -> Iterator[CorpusChunk]:
    """Yields the corpus as consecutive chunks of documents (see the module docstring).

    Documents left after the last full chunk form a chunk of their own if there are at least
    `min_chunk_documents` of them, and join the last full chunk otherwise.
    """
    pending: CorpusChunk | None = None
    documents: list[list[str]] = []
    num_bytes = 0
    for lines, document_bytes in iter_documents(paths, counts):
        counts.bytes_read += document_bytes
        num_bytes += document_bytes
        if lines:
            documents.append(lines)
        if num_bytes >= chunk_bytes and (len(documents) >= min_chunk_documents
                                          or num_bytes >= MAX_CHUNK_FACTOR * chunk_bytes):
            if pending is not None:
                yield pending
            pending = CorpusChunk(0 if pending is None else pending.index + 1, documents,
                                  num_bytes)
            documents, num_bytes = [], 0
    if pending is None:
        yield CorpusChunk(0, documents, num_bytes)
    elif len(documents) >= min_chunk_documents:
        yield pending
        yield CorpusChunk(pending.index + 1, documents, num_bytes)
    else:
        yield CorpusChunk(pending.index, pending.documents + documents,
                          pending.num_bytes + num_bytes)
