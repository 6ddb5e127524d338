"""`[CLS] A [SEP] B [SEP]` packed in the graph as the original `convert_single_example` packs it,
with dense ops only.

`pack_segments` truncates and packs the wordpiece ids of both in-graph tokenizers
(`data.text_tokenizer.TextTokenizer`, `serving.lite_tokenizer.LiteTokenizer`). Dense ops, not
TensorFlow's ragged ones (`tf.concat` of ragged rows, `tf.ragged.boolean_mask`), because LiteRT has
kernels for gathers, comparisons and selects over a [B, T] grid of positions and none for ragged
ops, and because these trace in a fraction of the time: each ragged op adds its shape assertions to
the graph of every signature of an export. `SegmentLayout` says, for each packed position, what
goes there; `place` fills it with any per-token values of the two segments (wordpiece ids,
character offsets).
"""
from __future__ import annotations

from dataclasses import dataclass

import tensorflow as tf

from data.tfrecord_schema import INPUT_IDS, INPUT_MASK, SEGMENT_IDS


def kept_lengths(first_lengths: tf.Tensor, second_lengths: tf.Tensor,
                 max_seq_length: int) -> tuple[tf.Tensor, tf.Tensor]:
    """Segment lengths left by the original truncation, for `[CLS] A [SEP] B [SEP]`.

    Closed form of `_truncate_seq_pair`'s loop (pop the last token of the longer segment, of B
    when equal, until both fit `max_seq_length - 3`): the longer side shrinks first and, once both
    are equal, A keeps ceil(budget / 2). A row with empty B is a single segment truncated to
    `max_seq_length - 2`. In int32: LiteRT's FLOOR_DIV has no int64 kernel.

    Args:
        first_lengths: int32 [B], tokens in A.
        second_lengths: int32 [B], tokens in B (0 where there is no B).
        max_seq_length: the packed length.

    Returns:
        int32 [B] kept lengths of A and of B.
    """
    budget = tf.where(second_lengths > 0, max_seq_length - 3, max_seq_length - 2)
    first_kept = tf.minimum(first_lengths, tf.maximum((budget + 1) // 2, budget - second_lengths))
    return first_kept, tf.minimum(second_lengths, budget - first_kept)


def packed_lengths(first_kept: tf.Tensor, second_kept: tf.Tensor) -> tf.Tensor:
    """int32: the tokens of a packed row, [CLS] and [SEP]s included, from its segments' kept
    lengths (B's [SEP] only where B keeps a token)."""
    return 2 + first_kept + second_kept + tf.cast(second_kept > 0, tf.int32)


def pack_segments(first_ids: tf.RaggedTensor, second_ids: tf.RaggedTensor | None,
                  max_seq_length: int, pad_to_longest: bool, cls_id: int,
                  sep_id: int) -> dict[str, tf.Tensor]:
    """Packs `[CLS] A [SEP] B [SEP]` as the original `convert_single_example`: truncated by
    `kept_lengths`, and a row whose B is empty (or truncated to nothing) as `[CLS] A [SEP]`.

    Args:
        first_ids, second_ids: int RaggedTensors [B, (tokens)], segments A and B (or None).
        max_seq_length: the longest packed sequence (at least 3); the output length T.
        pad_to_longest: pad only to the longest packed row instead (T at most max_seq_length).
        cls_id, sep_id: the ids of [CLS] and [SEP].

    Returns:
        `input_ids`, `input_mask`, `segment_ids`: int32 [B, T], zero-padded.
    """
    if max_seq_length < 3:
        raise ValueError(f"max_seq_length must be at least 3, got {max_seq_length}")
    first_lengths = tf.cast(first_ids.row_lengths(), tf.int32)
    if second_ids is None:
        second_lengths = second_starts = tf.zeros_like(first_lengths)
    else:
        second_lengths = tf.cast(second_ids.row_lengths(), tf.int32)
        second_starts = second_ids.row_starts()
    first_kept, second_kept = kept_lengths(first_lengths, second_lengths, max_seq_length)
    length = max_seq_length
    if pad_to_longest:
        length = tf.reduce_max(tf.concat([packed_lengths(first_kept, second_kept), [0]], axis=0))
    layout = SegmentLayout.build(first_kept, second_kept, first_ids.row_starts(), second_starts,
                                 length)
    second_values = None if second_ids is None else tf.cast(second_ids.flat_values, tf.int32)
    input_ids = layout.place(tf.cast(first_ids.flat_values, tf.int32), second_values, cls_id,
                             sep_id, 0)
    return {INPUT_IDS: input_ids, INPUT_MASK: layout.input_mask, SEGMENT_IDS: layout.segment_ids}


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
        return packed_lengths(self.first_kept, self.second_kept)

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
