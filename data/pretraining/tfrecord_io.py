"""TFRecord framing and atomic record files, in NumPy (no TensorFlow).

A TFRecord file is a sequence of
`uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)`, all little
endian, where the mask is `((crc >> 15) | (crc << 17)) + 0xa282ead8`. CRC32C (Castagnoli) is
computed for a whole batch of records at once: the records are right-aligned in a zero-padded
byte matrix (leading zero bytes leave a zero CRC register unchanged) and read four bytes a step
with two 16-bit lookup tables, one NumPy operation per step for every record of the batch; the
initial register's effect, which only depends on the length, is added at the end.

Record files are written atomically: under a hidden temporary name that says which process on
which host writes it, renamed into place when complete. A run killed before that leaves its
temporary files behind; a later run writing the same files removes them once their process is
gone (`remove_stale_temporary_files`).
"""
from __future__ import annotations

import contextlib
import itertools
import os
import re
import socket
import uuid
from typing import Sequence

import numpy as np

_CASTAGNOLI_REVERSED = 0x82F63B78
_MASK_DELTA = 0xA282EAD8
_BATCH_RECORDS = 4096

_TEMPORARY_SUFFIX = ".incomplete"
# `<host>-<pid>-<32 hex digits>`: the writing process and a fresh token.
_TEMPORARY_OWNER = re.compile(r"(?P<host>\w+)-(?P<pid>[0-9]+)-[0-9a-f]{32}", re.ASCII)


def _host_name() -> str:
    """This machine's name in letters, digits and `_` (no `-` or `.`, which separate parts)."""
    return re.sub(r"[^A-Za-z0-9]", "_", socket.gethostname()) or "localhost"


def _byte_tables() -> np.ndarray:
    """[4, 256] uint32: table k maps a byte to its CRC contribution after k more zero bytes."""
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> 1) ^ np.uint32(_CASTAGNOLI_REVERSED), table >> 1)
    tables = [table.astype(np.uint32)]
    for _ in range(3):
        previous = tables[-1]
        tables.append((previous >> 8) ^ tables[0][previous & 0xFF])
    return np.stack(tables)


def _half_word_tables(byte_tables: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[65536] uint32 tables for the low and the high 16 bits of a 4-byte step."""
    values = np.arange(1 << 16, dtype=np.uint32)
    low = byte_tables[3][values & 0xFF] ^ byte_tables[2][values >> 8]
    high = byte_tables[1][values & 0xFF] ^ byte_tables[0][values >> 8]
    return low, high


_BYTE_TABLES = _byte_tables()
_LOW_TABLE, _HIGH_TABLE = _half_word_tables(_BYTE_TABLES)


def crc32c(data: bytes) -> int:
    """CRC32C of one byte string (byte at a time; for short or single inputs)."""
    table = _BYTE_TABLES[0]
    crc = 0xFFFFFFFF
    for byte in data:
        crc = (crc >> 8) ^ int(table[(crc ^ byte) & 0xFF])
    return crc ^ 0xFFFFFFFF


_init_states = np.array([0xFFFFFFFF], np.uint32)


def _init_contribution(lengths: np.ndarray) -> np.ndarray:
    """uint32 [N]: the register after `lengths` zero bytes from the initial 0xFFFFFFFF.

    CRC updates are linear, so the register after some data from 0xFFFFFFFF is this XOR the
    register after the same data from 0.
    """
    global _init_states
    needed = int(lengths.max(initial=0)) + 1
    if len(_init_states) < needed:
        states = _init_states.tolist()
        table = _BYTE_TABLES[0]
        while len(states) < 2 * needed:
            state = states[-1]
            states.append((state >> 8) ^ int(table[state & 0xFF]))
        _init_states = np.array(states, np.uint32)
    return _init_states[lengths]


def _crc32c_right_aligned(matrix: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """CRC32C of each row's last `lengths[row]` bytes, after zero padding.

    Args:
      matrix: uint8 [N, W], W a multiple of 4; row i holds its record in its last lengths[i]
        bytes and zeros before them (leading zeros leave a zero register unchanged).
      lengths: int64 [N].

    Returns:
      uint32 [N].
    """
    num_rows = matrix.shape[0]
    words = np.ascontiguousarray(matrix.view("<u4").T)  # [W / 4, N]
    crc = np.zeros(num_rows, np.uint32)
    low = np.empty(num_rows, np.uint32)
    high = np.empty(num_rows, np.uint32)
    for word in words:
        np.bitwise_xor(crc, word, out=crc)
        np.bitwise_and(crc, 0xFFFF, out=low)
        np.right_shift(crc, 16, out=high)
        crc = np.take(_LOW_TABLE, low) ^ np.take(_HIGH_TABLE, high)
    return crc ^ _init_contribution(lengths) ^ np.uint32(0xFFFFFFFF)


def crc32c_batch(records: Sequence[bytes]) -> np.ndarray:
    """[N] uint32 CRC32C of each record."""
    result = np.empty(len(records), np.uint32)
    for start in range(0, len(records), _BATCH_RECORDS):
        batch = records[start:start + _BATCH_RECORDS]
        lengths = np.fromiter(map(len, batch), np.int64, len(batch))
        width = max(-(-int(lengths.max()) // 4) * 4, 4)
        padding = [bytes(n) for n in range(width + 1)]
        aligned = b"".join(itertools.chain.from_iterable(
            (padding[width - len(record)], record) for record in batch))
        matrix = np.frombuffer(aligned, np.uint8).reshape(len(batch), width)
        result[start:start + len(batch)] = _crc32c_right_aligned(matrix, lengths)
    return result


def mask_crc(crc: np.ndarray) -> np.ndarray:
    """The TFRecord mask of [N] uint32 CRCs."""
    crc = crc.astype(np.uint32)
    return ((crc >> 15) | (crc << 17)) + np.uint32(_MASK_DELTA)


def _rows_as_bytes(matrix: np.ndarray) -> list[bytes]:
    """Each row of a uint8 [N, K] matrix as a bytes object."""
    matrix = np.ascontiguousarray(matrix)
    return matrix.view(np.dtype((np.void, matrix.shape[1])))[:, 0].tolist()


def frame_records(records: Sequence[bytes]) -> tuple[bytes, list[int]]:
    """The records with their TFRecord length headers and checksums, back to back.

    Returns:
      (data, ends): the framed records concatenated, and the N + 1 offsets where each starts
      (and the last ends).
    """
    if not records:
        return b"", [0]
    lengths = np.fromiter((len(record) for record in records), "<u8", len(records))
    headers = lengths.view(np.uint8).reshape(-1, 8)
    header_crcs = mask_crc(_crc32c_right_aligned(headers, np.full(len(records), 8)))
    heads = _rows_as_bytes(np.concatenate(
        [headers, header_crcs.astype("<u4").view(np.uint8).reshape(-1, 4)], axis=1))
    tails = _rows_as_bytes(mask_crc(crc32c_batch(records)).astype("<u4").view(
        np.uint8).reshape(-1, 4))
    ends = np.zeros(len(records) + 1, np.int64)
    np.cumsum(lengths.astype(np.int64) + 16, out=ends[1:])
    data = b"".join(itertools.chain.from_iterable(zip(heads, records, tails)))
    return data, ends.tolist()


def split_framed(data: bytes, ends: Sequence[int]) -> list[bytes]:
    """The framed records of `frame_records`' output, one bytes object each."""
    return [data[start:end] for start, end in zip(ends, ends[1:])]


class AtomicRecordFile:
    """A TFRecord file written under a temporary name and renamed into place on `commit`.

    Until `commit`, the data lives in a hidden `.<name>.<host>-<pid>-<token>.incomplete` file of
    the same folder, so an interrupted run never leaves a file with the final name that looks
    complete.
    """

    def __init__(self, path: str):
        self.path = path
        directory, name = os.path.split(os.path.abspath(path))
        # A fresh name, created with the usual permissions (mkstemp would make it private).
        owner = f"{_host_name()}-{os.getpid()}-{uuid.uuid4().hex}"
        self._temp_path = os.path.join(directory, f".{name}.{owner}{_TEMPORARY_SUFFIX}")
        self._file = open(self._temp_path, "xb")
        self.num_records = 0

    def write_framed(self, framed_records: Sequence[bytes]) -> None:
        """Appends records already framed by `frame_records`."""
        with self._naming_failures():
            self._file.write(b"".join(framed_records))
        self.num_records += len(framed_records)

    def commit(self) -> None:
        """Flushes the data to disk and gives the file its final name."""
        with self._naming_failures():
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            os.replace(self._temp_path, self.path)

    @contextlib.contextmanager
    def _naming_failures(self):
        """A failed write (full disk, file-size limit) names no file: name the output."""
        try:
            yield
        except OSError as error:
            if error.filename:
                raise
            raise OSError(error.errno, f"writing {self.path} failed: {error.strerror}") from None

    def abort(self) -> None:
        """Closes and deletes the temporary file; the final path is left untouched."""
        self._file.close()
        if os.path.exists(self._temp_path):
            os.remove(self._temp_path)


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
