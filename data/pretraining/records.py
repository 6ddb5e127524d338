"""Serialized `tf.train.Example`s of pretraining instances, a batch at a time, without TensorFlow.

The records hold the original writer's seven features in its order (`tfrecord_schema`). Values are
varint-packed for the whole batch in NumPy; each map entry is a precomputed header (which only
depends on the packed length) followed by the packed bytes, so a record costs a few slices and
one join.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from data import tfrecord_schema as schema

# Values below 2**21 take at most 3 varint bytes, kept in the low bytes of a uint32 table entry.
_MAX_TABLE_VALUE = 1 << 21


@dataclasses.dataclass(frozen=True)
class _VarintTables:
    """Varints of 0..size-1: `encoded` little-endian uint32 (unused high bytes zero), `sizes`
    their byte counts, `as_bytes` each as a bytes object."""

    encoded: np.ndarray
    sizes: np.ndarray
    as_bytes: list[bytes]

    @classmethod
    def build(cls, size: int) -> _VarintTables:
        values = np.arange(size, dtype=np.uint32)
        sizes = 1 + (values >= 1 << 7).astype(np.uint32) + (values >= 1 << 14).astype(np.uint32)
        more0 = (sizes > 1).astype(np.uint32) << 7
        more1 = (sizes > 2).astype(np.uint32) << 7
        encoded = ((values & 0x7F) | more0) | ((((values >> 7) & 0x7F) | more1) << 8) | (
            ((values >> 14) & 0x7F) << 16)
        encoded = encoded.astype("<u4")
        as_bytes = [word.tobytes()[:n] for word, n in zip(encoded, sizes.tolist())]
        return cls(encoded, sizes.astype(np.int64), as_bytes)


def _varint_rows(values: np.ndarray, tables: _VarintTables) -> list[bytes]:
    """Each row of int [N, M] values (each below the tables' size) packed as protobuf varints.

    Only the varint of 0 holds a zero byte (any other varint's bytes are nonzero), so dropping
    every zero byte of the rows' table entries leaves the varints of the nonzero values; a row's
    trailing zeros (padding) are put back as zero bytes, and the rare row with a zero before its
    last nonzero value is packed value by value.
    """
    num_rows, width = values.shape
    nonzero = values != 0
    # Values up to and including the last nonzero one; the rest of the row is zeros.
    body_length = width - np.argmax(nonzero[:, ::-1], axis=1)
    body_length[~nonzero.any(axis=1)] = 0
    body_sizes = np.where(nonzero, tables.sizes[values], 0).sum(axis=1)
    ends = np.zeros(num_rows + 1, np.int64)
    np.cumsum(body_sizes, out=ends[1:])
    bodies = tables.encoded[values].tobytes().translate(None, b"\x00")
    zeros = [bytes(n) for n in range(width + 1)]
    rows = [bodies[start:end] + zeros[width - length] for start, end, length in zip(
        ends.tolist(), ends[1:].tolist(), body_length.tolist())]
    inner_zero = np.arange(width)[None, :] < body_length[:, None]
    for row in np.flatnonzero(np.any(inner_zero & ~nonzero, axis=1)).tolist():
        rows[row] = b"".join([tables.as_bytes[v] for v in values[row].tolist()])
    return rows


def _object_table(items: list[bytes]) -> np.ndarray:
    """A 1-D object array of bytes, for vectorized lookups."""
    table = np.empty(len(items), object)
    table[:] = items
    return table


def _int64_headers(key: str, max_packed: int) -> list[bytes]:
    """Entry bytes before the packed values of `key`, for each packed length 0..max_packed."""
    prefix = schema.feature_entry_prefix(key)
    headers = []
    for length in range(max_packed + 1):
        entry = schema.encode_int64_entry(prefix, bytes(length))
        headers.append(entry[:len(entry) - length])
    return headers


# Not tf.train.Example: bench/data/tfrecord_crc.py measures building and serializing
# tf.train.Examples at 16-19x this encoder's time on the same instances (50-70 us a record against
# 3-4 us, while the whole worker takes 8-11 us), with a map order that changes between processes;
# and importing TensorFlow would add 2.7 s to every worker process.
class PretrainingRecordEncoder:
    """Encodes batches of masked instances as serialized pretraining `tf.train.Example`s.

    A record is the outer Example header, then the seven entries; the entries of input_mask
    and segment_ids have a fixed size and are cut from one byte matrix, the masked-LM weights
    and next-sentence entries come from a table indexed by (count, label), and the three
    varint-packed entries are a header (a table indexed by packed length) and their bytes.
    """

    def __init__(self, max_seq_length: int, max_predictions_per_seq: int, vocab_size: int):
        """Precomputes the constant parts of the records.

        Args:
          max_seq_length: L.
          max_predictions_per_seq: P.
          vocab_size: one more than the largest token id (at most 2**21).
        """
        if not 0 < vocab_size <= _MAX_TABLE_VALUE:
            raise ValueError(f"vocab_size={vocab_size} must be in [1, {_MAX_TABLE_VALUE}]")
        self.max_seq_length = max_seq_length
        self.max_predictions_per_seq = max_predictions_per_seq
        self._tables = _VarintTables.build(max(vocab_size, max_seq_length))
        max_packed = 3 * max_seq_length
        self._headers = {key: _int64_headers(key, max_packed) for key in (
            schema.INPUT_IDS, schema.MASKED_LM_POSITIONS, schema.MASKED_LM_IDS)}
        self._header_tables = {key: _object_table(headers)
                               for key, headers in self._headers.items()}
        self._header_sizes = {key: np.array([len(h) for h in headers])
                              for key, headers in self._headers.items()}
        mask_header = _int64_headers(schema.INPUT_MASK, max_seq_length)[-1]
        segment_header = _int64_headers(schema.SEGMENT_IDS, max_seq_length)[-1]
        self._mask_header = np.frombuffer(mask_header, np.uint8)
        self._segment_header = np.frombuffer(segment_header, np.uint8)
        self._fixed_size = len(mask_header) + len(segment_header) + 2 * max_seq_length
        weights_prefix = schema.feature_entry_prefix(schema.MASKED_LM_WEIGHTS)
        labels_prefix = schema.feature_entry_prefix(schema.NEXT_SENTENCE_LABELS)
        tails = [schema.encode_float_entry(weights_prefix, np.array(
                     [1.0] * n + [0.0] * (max_predictions_per_seq - n), "<f4").tobytes())
                 + schema.encode_int64_entry(labels_prefix, bytes([label]))
                 for n in range(max_predictions_per_seq + 1) for label in (0, 1)]
        self._tails = _object_table(tails)  # index 2 * count + label
        self._tail_size = len(tails[0])
        largest = self._fixed_size + self._tail_size + sum(
            int(sizes[-1]) + len(sizes) - 1 for sizes in self._header_sizes.values())
        self._outer_headers = _object_table(
            [b"\x0a" + schema.encode_varint(n) for n in range(largest + 1)])

    def _fixed_entries(self, lengths: np.ndarray, a_lengths: np.ndarray) -> list[bytes]:
        """The input_mask and segment_ids entries of each row, as one piece."""
        num_rows, max_length = len(lengths), self.max_seq_length
        position = np.arange(max_length)[None, :]
        real = position < lengths[:, None]
        block = np.empty((num_rows, self._fixed_size), np.uint8)
        mask_start = len(self._mask_header)
        segment_start = mask_start + max_length + len(self._segment_header)
        block[:, :mask_start] = self._mask_header
        block[:, mask_start:mask_start + max_length] = real
        block[:, mask_start + max_length:segment_start] = self._segment_header
        block[:, segment_start:] = real & (position >= a_lengths[:, None] + 2)
        return block.view(np.dtype((np.void, self._fixed_size)))[:, 0].tolist()

    def encode(self, input_ids: np.ndarray, lengths: np.ndarray, a_lengths: np.ndarray,
               masked_lm_positions: np.ndarray, masked_lm_ids: np.ndarray,
               num_masked: np.ndarray, is_random_next: np.ndarray) -> list[bytes]:
        """Serialized Examples, one per row.

        Args:
          input_ids: int32 [N, L], masked tokens, zero-padded.
          lengths: int64 [N], real length of each row.
          a_lengths: int64 [N], tokens of segment A ([CLS] A [SEP] have segment id 0).
          masked_lm_positions: int32 [N, P], zero-padded.
          masked_lm_ids: int32 [N, P], zero-padded.
          num_masked: int64 [N], real entries of the masked-LM slots.
          is_random_next: bool [N], the next-sentence label (1 = random next).
        """
        size = self._fixed_size + self._tail_size
        varint_entries = {}
        for key, values in ((schema.INPUT_IDS, input_ids),
                            (schema.MASKED_LM_POSITIONS, masked_lm_positions),
                            (schema.MASKED_LM_IDS, masked_lm_ids)):
            packed = _varint_rows(values, self._tables)
            packed_sizes = np.fromiter(map(len, packed), np.int64, len(packed))
            varint_entries[key] = (self._header_tables[key][packed_sizes].tolist(), packed)
            size = size + self._header_sizes[key][packed_sizes] + packed_sizes
        pieces = (self._outer_headers[size].tolist(), *varint_entries[schema.INPUT_IDS],
                  self._fixed_entries(lengths, a_lengths),
                  *varint_entries[schema.MASKED_LM_POSITIONS],
                  *varint_entries[schema.MASKED_LM_IDS],
                  self._tails[2 * num_masked + is_random_next].tolist())
        return list(map(b"".join, zip(*pieces)))
