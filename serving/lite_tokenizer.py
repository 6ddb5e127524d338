"""`LiteTokenizer`: in-graph BERT tokenization whose every op has a LiteRT kernel.

`data.text_tokenizer.TextTokenizer`, the project's in-graph tokenizer, reproduces
`data.tokenization.FullTokenizer` exactly, but its ops (UnicodeDecode / UnicodeEncode, LowerBound /
UpperBound, BitwiseAnd, hash-table lookups, tensorflow-text's `WordpieceTokenizeWithOffsets`) have
no LiteRT kernels. This tokenizer is tensorflow-text's `FastBertTokenizer` (custom ops
`FastBertNormalize` and `FastWordpieceTokenizeWithOffsets`, whose LiteRT kernels tensorflow-text
ships) with the packing, offsets and `[MASK]` handling written in ops LiteRT has built in.

FastBertTokenizer normalises text otherwise than `FullTokenizer` in a few places
(`docs/new-text-and-serving.md#serving-on-phones-litert` names and counts them on the shared
corpora): with lower-casing it applies Unicode NFKC case folding (`½` -> `1⁄2`, `″` -> `′′`,
`…` -> `...`, `µ` -> `μ`, `ß` -> `ss`, `ς` -> `σ`), control characters break words instead of
vanishing, and words over 200 bytes (not characters) become `[UNK]`.
"""
from __future__ import annotations

import os

import tensorflow as tf
import tensorflow_text as tf_text

from data import tokenization
from data.segment_layout import pack_segments
from data.text_tokenizer import read_vocab

_MAX_BYTES_PER_WORD = 200  # FullTokenizer's 200 characters, counted in bytes


class LiteTokenizer(tf.Module):
    """WordPiece tokenization and packing of `tf.string` batches in LiteRT-convertible ops.

    The interface of `TextTokenizer` (`tokenize`, `tokenize_with_offsets`, `pack`,
    `do_lower_case`), so that `serving.servers.TextModelServer` runs on either.
    """

    def __init__(self, vocab_file: str | os.PathLike, do_lower_case: bool = True,
                 name: str | None = None):
        super().__init__(name=name)
        vocab, (self.unk_id, self.cls_id, self.sep_id) = read_vocab(vocab_file)
        by_id = {index: token for token, index in vocab.items()}
        if sorted(by_id) != list(range(len(by_id))):
            raise ValueError(f"vocab file {vocab_file} repeats a token")
        self.do_lower_case = do_lower_case
        self.vocab_size = len(by_id)
        # tensorflow-text's FastBertTokenizer, in its two parts: its offsets are gathered here
        # with dense ops (its own gather is a ragged one).
        self._normalizer = tf_text.FastBertNormalizer(lower_case_nfd_strip_accents=do_lower_case)
        self._wordpiece = tf_text.FastWordpieceTokenizer(
            [by_id[i] for i in range(len(by_id))], token_out_type=tf.int32,
            unknown_token=tokenization.UNK, max_bytes_per_word=_MAX_BYTES_PER_WORD)

    def tokenize(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """Wordpiece ids of `texts` (tf.string [B]): int32 RaggedTensor [B, (tokens)]."""
        return self._wordpiece.tokenize(self._normalizer.normalize(texts))

    def tokenize_with_offsets(self, texts: tf.Tensor):
        """Wordpiece ids and code-point offsets of `texts` (tf.string [B], valid UTF-8).

        Returns:
            (ids, begin, end): int32, int64, int64 RaggedTensors [B, (tokens)]; token t of row b
            covers code points begin[b, t] <= i < end[b, t] of the text.
        """
        ids, rows, begin, end = self._pieces(texts)
        texts_bytes = _Bytes(texts)
        first_byte = tf.gather(texts_bytes.row_starts, rows)
        first_codepoint = tf.gather(texts_bytes.codepoint_index(texts_bytes.row_starts), rows)
        begin, end = (tf.cast(texts_bytes.codepoint_index(first_byte + x) - first_codepoint,
                              tf.int64) for x in (begin, end))
        return ids, ids.with_flat_values(begin), ids.with_flat_values(end)

    def tokenize_keeping(self, texts: tf.Tensor, literal: str, literal_id: int) -> tf.RaggedTensor:
        """`tokenize`, with each occurrence of the ASCII string `literal` (`[MASK]`) in a text one
        token `literal_id`, as if the text had been cut there and each piece tokenized alone.

        `literal` must begin and end with punctuation, so that the tokenizer splits it off its
        neighbours whatever they are.
        """
        ids, rows, begin, _ = self._pieces(texts)
        texts_bytes = _Bytes(texts)
        token_bytes = tf.gather(texts_bytes.row_starts, rows) + begin       # [tokens]
        found = texts_bytes.find(literal)                                  # [N + 1]
        seen = tf.cumsum(tf.cast(found, tf.int32), exclusive=True)         # [N + 1]
        inside = (tf.gather(seen, token_bytes + 1)
                  - tf.gather(seen, tf.maximum(token_bytes + 1 - len(literal), 0))) > 0
        starts = tf.gather(found, token_bytes)
        keep = starts | ~inside
        values = tf.where(starts, tf.constant(literal_id, tf.int32), ids.flat_values)
        row_lengths = tf.math.unsorted_segment_sum(tf.cast(keep, tf.int32), rows,
                                                   tf.shape(texts)[0])
        return tf.RaggedTensor.from_row_lengths(tf.boolean_mask(values, keep), row_lengths)

    def _pieces(self, texts: tf.Tensor):
        """Wordpieces of `texts` (tf.string [B]) with the bytes they span in their text.

        Returns:
            ids: int32 RaggedTensor [B, (tokens)].
            rows, begin, end: int32 [tokens], each token's row and [begin, end) byte offsets.
        """
        normalized, offsets = self._normalizer.normalize_with_offsets(texts)
        ids, starts, ends = self._wordpiece.tokenize_with_offsets(normalized)
        rows = _value_rows(ids)
        # offsets [B, (normalized bytes + 1)]: the text's byte of each normalized byte.
        base = tf.gather(tf.cast(offsets.row_starts(), tf.int32), rows)
        flat_offsets = tf.cast(offsets.flat_values, tf.int32)
        begin, end = (tf.gather(flat_offsets, base + tf.cast(x.flat_values, tf.int32))
                      for x in (starts, ends))
        return ids, rows, begin, end

    def pack(self, first_ids: tf.RaggedTensor, second_ids: tf.RaggedTensor | None,
             max_seq_length: int, pad_to_longest: bool = False) -> dict[str, tf.Tensor]:
        """`TextTokenizer.pack` (`data.segment_layout.pack_segments`, dense ops)."""
        return pack_segments(first_ids, second_ids, max_seq_length, pad_to_longest, self.cls_id,
                             self.sep_id)


def _value_rows(ragged: tf.RaggedTensor) -> tf.Tensor:
    """int32 [N]: the row of each of a ragged tensor's N flat values.

    The running count of the row starts at or before each value (`value_rowids()` needs ops that
    LiteRT lacks); empty rows start where the next row does, and are counted there.
    """
    starts = tf.cast(ragged.row_splits[1:-1], tf.int32)
    size = tf.shape(ragged.flat_values)[0]
    return tf.cumsum(tf.math.unsorted_segment_sum(tf.ones_like(starts), starts, size + 1))[:-1]


class _Bytes:
    """The UTF-8 bytes of a batch of texts, flat, with their rows' starts."""

    def __init__(self, texts: tf.Tensor):
        split = tf_text.ByteSplitter().split(texts)                        # uint8 [B, (bytes)]
        self.values = tf.cast(split.flat_values, tf.int32)                 # [N]
        self.row_starts = tf.cast(split.row_starts(), tf.int32)            # [B]
        self.rows = _value_rows(split)                                     # [N]

    def codepoint_index(self, byte_index: tf.Tensor) -> tf.Tensor:
        """int32: how many code points begin before each flat byte index (0 <= index <= N)."""
        begins = (self.values < 0x80) | (self.values >= 0xC0)  # not a continuation byte
        counts = tf.cumsum(tf.concat([tf.cast(begins, tf.int32), [0]], axis=0), exclusive=True)
        return tf.gather(counts, byte_index)

    def find(self, literal: str) -> tf.Tensor:
        """bool [N + 1]: whether `literal` starts at each flat byte index, within its row."""
        size = tf.shape(self.values)[0]
        found = tf.ones([size], tf.bool)
        for shift, byte in enumerate(literal.encode("ascii")):
            index = tf.minimum(tf.range(size) + shift, size - 1)
            found &= ((tf.range(size) + shift < size) & (tf.gather(self.values, index) == byte)
                      & (tf.gather(self.rows, index) == self.rows))
        return tf.concat([found, [False]], axis=0)
