"""TFRecord framing and atomic record files (no TensorFlow).

A TFRecord file is a sequence of
`uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)`, all little
endian, where the mask is `((crc >> 15) | (crc << 17)) + 0xa282ead8`. The CRC32C (Castagnoli)
of each record comes from `google_crc32c` (Google's C library); the lengths, masks and headers
are laid out for a whole batch of records at once in NumPy.

Record files are written atomically: under a hidden temporary name that says which process on
which host writes it, renamed into place when complete. A run killed before that leaves its
temporary files behind; a later run writing the same files removes them once their process is
gone (`remove_stale_temporary_files`).
"""
from __future__ import annotations

import itertools
import os
import re
import socket
from typing import Sequence
import uuid

import google_crc32c
import numpy as np

from utils.output_files import AtomicFile

_MASK_DELTA = 0xA282EAD8

_TEMPORARY_SUFFIX = ".incomplete"
# `<host>-<pid>-<32 hex digits>`: the writing process and a fresh token.
_TEMPORARY_OWNER = re.compile(r"(?P<host>\w+)-(?P<pid>[0-9]+)-[0-9a-f]{32}", re.ASCII)


def _host_name() -> str:
    """This machine's name in letters, digits and `_` (no `-` or `.`, which separate parts)."""
    return re.sub(r"[^A-Za-z0-9]", "_", socket.gethostname()) or "localhost"


def crc32c(data: bytes) -> int:
    """CRC32C of one byte string."""
    return google_crc32c.value(data)


def mask_crc(crc: np.ndarray) -> np.ndarray:
    """The TFRecord mask of [N] uint32 CRCs."""
    crc = crc.astype(np.uint32)
    return ((crc >> 15) | (crc << 17)) + np.uint32(_MASK_DELTA)


def _rows_as_bytes(matrix: np.ndarray) -> list[bytes]:
    """Each row of a uint8 [N, K] matrix as a bytes object."""
    matrix = np.ascontiguousarray(matrix)
    return matrix.view(np.dtype((np.void, matrix.shape[1])))[:, 0].tolist()


def _masked_crcs(records: Sequence[bytes]) -> np.ndarray:
    """uint8 [N, 4]: the masked CRC32C of each record, little endian."""
    crcs = np.fromiter(map(google_crc32c.value, records), np.uint32, len(records))
    return mask_crc(crcs).astype("<u4").view(np.uint8).reshape(-1, 4)


# Not tf.io.TFRecordWriter: the worker processes frame their records without TensorFlow, and
# bench/data/tfrecord_crc.py measures the writer at 2.3-2.4x this function's time per record.
def frame_records(records: Sequence[bytes]) -> tuple[bytes, list[int]]:
    """The records with their TFRecord length headers and checksums, back to back.

    Returns:
      (data, ends): the framed records concatenated, and the N + 1 offsets where each starts
      (and the last ends).
    """
    if not records:
        return b"", [0]
    lengths = np.fromiter(map(len, records), "<u8", len(records))
    headers = lengths.view(np.uint8).reshape(-1, 8)
    heads = _rows_as_bytes(np.concatenate([headers, _masked_crcs(_rows_as_bytes(headers))],
                                          axis=1))
    tails = _rows_as_bytes(_masked_crcs(records))
    ends = np.zeros(len(records) + 1, np.int64)
    np.cumsum(lengths.astype(np.int64) + 16, out=ends[1:])
    data = b"".join(itertools.chain.from_iterable(zip(heads, records, tails)))
    return data, ends.tolist()


def split_framed(data: bytes, ends: Sequence[int]) -> list[bytes]:
    """The framed records of `frame_records`' output, one bytes object each."""
    return [data[start:end] for start, end in zip(ends, ends[1:])]


class AtomicRecordFile(AtomicFile):
    """A TFRecord file written under a temporary name and renamed into place on `commit`.

    Until `commit`, the data lives in a hidden `.<name>.<host>-<pid>-<token>.incomplete` file of
    the same folder (the owner in the name lets `remove_stale_temporary_files` tell a crashed
    run's file from a running one's).
    """

    def __init__(self, path: str):
        owner = f"{_host_name()}-{os.getpid()}-{uuid.uuid4().hex}"
        super().__init__(path, binary=True,
                         temp_name=f".{os.path.basename(path)}.{owner}{_TEMPORARY_SUFFIX}")
        self.num_records = 0

    def write_framed(self, framed_records: Sequence[bytes]) -> None:
        """Appends records already framed by `frame_records`."""
        self.write(b"".join(framed_records))
        self.num_records += len(framed_records)


def _process_is_running(pid: int) -> bool:
    """Whether process `pid` exists on this host (another user's process counts too)."""
    if pid <= 0:
        return True  # not a process id: keep the file rather than guess
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temporary_files(path: str) -> tuple[list[str], list[str]]:
    """Removes the temporary files that killed writers of `path` left beside it.

    A temporary file of `path` (`AtomicRecordFile`'s name for it) is stale when the process that
    wrote it ran on this host and no longer exists. The files of a running process, and those
    written from another host (a shared folder), are kept: that writer may still be going.

    Returns:
      (removed, kept): paths of the temporary files of `path` deleted and left in place.
    """
    directory, name = os.path.split(os.path.abspath(path))
    prefix = f".{name}."
    try:
        entries = sorted(os.listdir(directory))
    except FileNotFoundError:
        return [], []
    removed, kept = [], []
    host = _host_name()
    for entry in entries:
        if not (entry.startswith(prefix) and entry.endswith(_TEMPORARY_SUFFIX)):
            continue
        owner = _TEMPORARY_OWNER.fullmatch(entry[len(prefix):-len(_TEMPORARY_SUFFIX)])
        if owner is None:
            continue  # another name that merely looks alike
        temporary = os.path.join(directory, entry)
        if owner["host"] != host or _process_is_running(int(owner["pid"])):
            kept.append(temporary)
            continue
        try:
            os.remove(temporary)
        except FileNotFoundError:
            continue  # another run removed it first
        removed.append(temporary)
    return removed, kept
