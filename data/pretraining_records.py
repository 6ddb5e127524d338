"""Serialized `tf.train.Example`s of pretraining instances, a batch at a time, without TensorFlow.

The records hold the original writer's seven features in its order (`tfrecord_schema`). Values are
varint-packed for the whole batch in NumPy; each map entry is a precomputed header (which only
depends on the packed length) followed by the packed bytes, so a record costs a few slices and
one join.
"""
from __future__ import annotations

import numpy as np

from data import tfrecord_schema as schema

# Values below 2**21 take at most 3 varint bytes, kept in the low bytes of a uint32 table entry.
_MAX_TABLE_VALUE = 1 << 21


def _varint_tables(size: int) -> tuple[np.ndarray, np.ndarray]:
    """Two little-endian uint32 [size] tables: each value's varint bytes, and a 0/1 byte flag
    per byte position telling whether that byte belongs to the varint."""
    values = np.arange(size, dtype=np.uint32)
    counts = 1 + (values >= 1 << 7).astype(np.uint32) + (values >= 1 << 14).astype(np.uint32)
    more0 = (counts > 1).astype(np.uint32) << 7
    more1 = (counts > 2).astype(np.uint32) << 7
    encoded = ((values & 0x7F) | more0) | ((((values >> 7) & 0x7F) | more1) << 8) | (
        ((values >> 14) & 0x7F) << 16)
    flags = np.uint32(1) | ((counts > 1).astype(np.uint32) << 8) | (
        (counts > 2).astype(np.uint32) << 16)
    return encoded.astype("<u4"), flags.astype("<u4")


def _varint_rows(values: np.ndarray, tables: tuple[np.ndarray, np.ndarray]
                 ) -> tuple[bytes, list[int]]:
    """Packs each row of int [N, M] values (each below the tables' size) as protobuf varints.

    Returns:
      (blob, ends): the rows' packed bytes concatenated, and the N + 1 row boundaries.
    """
    encoded, flags = tables
    entry_bytes = encoded[values].view(np.uint8).reshape(-1)  # [N * M * 4]
    in_varint = flags[values].view(np.uint8)  # [N, M * 4], 1 where the byte is kept
    ends = np.zeros(len(values) + 1, np.int64)
    np.cumsum(in_varint.sum(axis=1, dtype=np.int64), out=ends[1:])
    return entry_bytes[np.flatnonzero(in_varint)].tobytes(), ends.tolist()


def _fixed_rows(values: np.ndarray) -> tuple[bytes, list[int]]:
    """Packs rows of values in [0, 127], one varint byte each: (blob, N + 1 row boundaries)."""
    return values.astype(np.uint8).tobytes(), list(range(0, values.size + 1, values.shape[1]))


class PretrainingRecordEncoder:
    """Encodes batches of masked instances as serialized pretraining `tf.train.Example`s."""

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
        self._tables = _varint_tables(max(vocab_size, max_seq_length))
        max_packed = 3 * max_seq_length
        self._varint = [schema.encode_varint(n) for n in range(8 * max_packed + 64)]
        self._ids_headers = self._int64_headers(schema.INPUT_IDS, max_packed)
        self._positions_headers = self._int64_headers(schema.MASKED_LM_POSITIONS, max_packed)
        self._labels_headers = self._int64_headers(schema.MASKED_LM_IDS, max_packed)
        self._mask_header = self._int64_headers(schema.INPUT_MASK, max_seq_length)[-1]
        self._segment_header = self._int64_headers(schema.SEGMENT_IDS, max_seq_length)[-1]
        weights_prefix = schema.feature_entry_prefix(schema.MASKED_LM_WEIGHTS)
        self._weights_entries = [
            schema.encode_float_entry(weights_prefix, np.array(
                [1.0] * n + [0.0] * (max_predictions_per_seq - n), "<f4").tobytes())
            for n in range(max_predictions_per_seq + 1)]
        labels_prefix = schema.feature_entry_prefix(schema.NEXT_SENTENCE_LABELS)
        self._next_sentence_entries = [schema.encode_int64_entry(labels_prefix, bytes([label]))
                                       for label in (0, 1)]

    @staticmethod
    def _int64_headers(key: str, max_packed: int) -> list[bytes]:
        """Entry bytes before the packed values, for each packed length 0..max_packed."""
        prefix = schema.feature_entry_prefix(key)
        headers = []
        for length in range(max_packed + 1):
            entry = schema.encode_int64_entry(prefix, bytes(length))
            headers.append(entry[:len(entry) - length])
        return headers

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
        position = np.arange(self.max_seq_length)[None, :]
        real = position < lengths[:, None]
        segment_ids = real & (position >= a_lengths[:, None] + 2)
        ids_blob, ids_ends = _varint_rows(input_ids, self._tables)
        positions_blob, positions_ends = _varint_rows(masked_lm_positions, self._tables)
        labels_blob, labels_ends = _varint_rows(masked_lm_ids, self._tables)
        mask_blob, _ = _fixed_rows(real)
        segment_blob, _ = _fixed_rows(segment_ids)
        width = self.max_seq_length
        varint = self._varint
        records = []
        for row, (count, label) in enumerate(zip(num_masked.tolist(),
                                                 is_random_next.tolist())):
            ids = ids_blob[ids_ends[row]:ids_ends[row + 1]]
            positions = positions_blob[positions_ends[row]:positions_ends[row + 1]]
            labels = labels_blob[labels_ends[row]:labels_ends[row + 1]]
            features = b"".join((
                self._ids_headers[len(ids)], ids,
                self._mask_header, mask_blob[row * width:(row + 1) * width],
                self._segment_header, segment_blob[row * width:(row + 1) * width],
                self._positions_headers[len(positions)], positions,
                self._labels_headers[len(labels)], labels,
                self._weights_entries[count], self._next_sentence_entries[label]))
            records.append(b"\x0a" + varint[len(features)] + features)
        return records
