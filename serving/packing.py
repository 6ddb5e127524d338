"""`[CLS] A [SEP] B [SEP]` laid out with dense ops only, for graphs that LiteRT runs.

TensorFlow's ragged ops (`tf.concat` of ragged rows, `tf.ragged.boolean_mask`, `tf.ragged.range`)
have no LiteRT kernels; gathers, comparisons and selects over a [B, T] grid of positions do.
`SegmentLayout` says, for each packed position, what goes there; `place` fills it with any
per-token values of the two segments (wordpiece ids, character offsets).
"""
from __future__ import annotations

from dataclasses import dataclass

import tensorflow as tf


@dataclass
class SegmentLayout:
    """Where the kept tokens of A and B go in `[CLS] A [SEP] B [SEP]` rows of T positions.

    Attributes:
        first_kept, second_kept: int32 [B, 1], tokens of A and B kept (B's [SEP] only where
            second_kept > 0).
        first_starts, second_starts: int32 [B, 1], index of each row's first token in the
            segment's flat values.
        positions: int32 [1, T], 0 .. T - 1.
    """

    first_kept: tf.Tensor
    second_kept: tf.Tensor
    first_starts: tf.Tensor
    second_starts: tf.Tensor
    positions: tf.Tensor

    @classmethod
    def build(cls, first_kept: tf.Tensor, second_kept: tf.Tensor, first_starts: tf.Tensor,
              second_starts: tf.Tensor, length: tf.Tensor | int) -> SegmentLayout:
        """From int [B] kept lengths and row starts, for rows of `length` positions."""
        def column(x):
            return tf.cast(x, tf.int32)[:, tf.newaxis]
        return cls(column(first_kept), column(second_kept), column(first_starts),
                   column(second_starts), tf.range(length, dtype=tf.int32)[tf.newaxis])

    @property
    def packed_lengths(self) -> tf.Tensor:
        """int32 [B, 1]: real tokens of each row, [CLS] and [SEP]s included."""
        return 2 + self.first_kept + self.second_kept + tf.cast(self.second_kept > 0, tf.int32)

    @property
    def in_first(self) -> tf.Tensor:
        """bool [B, T]: the positions of A's tokens."""
        return (self.positions >= 1) & (self.positions <= self.first_kept)

    @property
    def in_second(self) -> tf.Tensor:
        """bool [B, T]: the positions of B's tokens."""
        start = self.first_kept + 2
        return (self.positions >= start) & (self.positions < start + self.second_kept)

    @property
    def input_mask(self) -> tf.Tensor:
        """int32 [B, T]: 1 on [CLS], the tokens and the [SEP]s."""
        return tf.cast(self.positions < self.packed_lengths, tf.int32)

    @property
    def segment_ids(self) -> tf.Tensor:
        """int32 [B, T]: 1 on B's tokens and its [SEP], 0 elsewhere."""
        second = (self.positions >= self.first_kept + 2) & (self.positions < self.packed_lengths)
        return tf.cast(second, tf.int32)

    def place(self, first_values: tf.Tensor, second_values: tf.Tensor | None, cls, sep,
              pad) -> tf.Tensor:
        """The segments' values at their tokens' positions, `cls` / `sep` / `pad` elsewhere.

        Args:
            first_values, second_values: [N] flat per-token values of A and B (B may be None
                when no row has B), of the dtype of the result.
            cls, sep, pad: scalars put at [CLS], at each [SEP] and after the row's end.

        Returns:
            [B, T] of the values' dtype.
        """
        dtype = first_values.dtype
        cls, sep, pad = (tf.cast(x, dtype) for x in (cls, sep, pad))
        result = tf.where(self.positions == 0, cls, pad)
        result = tf.where(self.positions == self.first_kept + 1, sep, result)
        result = tf.where(self.in_first, _take(first_values, self.first_starts + self.positions - 1),
                          result)
        if second_values is not None:
            second_sep = (self.second_kept > 0) & (
                self.positions == self.first_kept + 2 + self.second_kept)
            result = tf.where(second_sep, sep, result)
            second_index = self.second_starts + self.positions - self.first_kept - 2
            result = tf.where(self.in_second, _take(second_values, second_index), result)
        return result


def _take(values: tf.Tensor, index: tf.Tensor) -> tf.Tensor:
    """values[index] where index is in range, anything elsewhere (the caller selects it away)."""
    padded = tf.concat([values, tf.zeros([1], values.dtype)], axis=0)  # never empty
    return tf.gather(padded, tf.clip_by_value(index, 0, tf.shape(values)[0]))
