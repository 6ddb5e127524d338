"""In-graph BERT tokenization for tf.data pipelines and SavedModels.

`TextTokenizer` reproduces `data.tokenization.FullTokenizer` with TensorFlow ops. Text is
decoded to code points; every per-character decision of the original (removed controls,
whitespace, CJK ideographs, punctuation, lower-casing with accent stripping, Greek final
sigma) is read from tables (`data.character_classes`) built once through the functions
of `data.tokenization`, so both tokenizers follow the same Unicode version. Words then go
through tensorflow-text's `WordpieceTokenizer`. (tensorflow-text's `BertTokenizer` and
`FastBertTokenizer` normalise differently: control characters break words instead of
vanishing, non-ASCII whitespace, compatibility forms and case folding are treated
otherwise, and the word limit is counted in bytes.)
"""
from __future__ import annotations

import os

import tensorflow as tf
import tensorflow_text as tf_text

from data import tokenization
from data.character_classes import (CAPITAL_SIGMA, CASE_IGNORABLE, CASED, CJK, FINAL_SIGMA, PUNCT,
                                   REMOVE, SPACE, character_tables)
from data.segment_layout import pack_segments

_MAX_CHARS_PER_WORD = 200
_MAX_UTF8_BYTES_PER_CHAR = 4


def _previous(values: tf.Tensor, fill) -> tf.Tensor:
    """values shifted right by one along their only axis, `fill` first."""
    return tf.concat([tf.fill([1], tf.cast(fill, values.dtype)), values[:-1]], axis=0)


def _searchsorted(sorted_values: tf.Tensor, values: tf.Tensor, side: str = "left") -> tf.Tensor:
    """1-D `tf.searchsorted`; returns int64 [N]."""
    found = tf.searchsorted(sorted_values[tf.newaxis], values[tf.newaxis], side=side,
                            out_type=tf.int64)
    return found[0]


def read_vocab(vocab_file: str | os.PathLike):
    """`tokenization.load_vocab` of a vocabulary the in-graph tokenizers can pack with, and its
    [UNK], [CLS] and [SEP] ids; a vocabulary without one of them is refused."""
    vocab = tokenization.load_vocab(vocab_file)
    specials = (tokenization.UNK, tokenization.CLS, tokenization.SEP)
    for special in specials:
        if special not in vocab:
            raise ValueError(f"vocab file {vocab_file} has no {special} token")
    return vocab, tuple(vocab[t] for t in specials)


class TextTokenizer(tf.Module):
    """WordPiece tokenization of `tf.string` batches, as `FullTokenizer` does it.

    Returns wordpiece ids of every string plus each token's [begin, end) offsets in code
    points of the input (the index into the Python str of the UTF-8 decoded input, invalid
    bytes dropped as `convert_to_unicode` does), and packs one or two segments into the
    fixed-length `input_ids` / `input_mask` / `segment_ids` of the original scripts.

    Characters are mapped one at a time, so a word holding two combining marks of class
    Mc with non-zero combining class in non-canonical order (NFD would reorder them) is the
    one case where the lower-cased output could differ from `FullTokenizer`.
    """

    def __init__(self, vocab_file: str | os.PathLike, do_lower_case: bool = True,
                 name: str | None = None):
        super().__init__(name=name)
        vocab, (self.unk_id, self.cls_id, self.sep_id) = read_vocab(vocab_file)
        self.do_lower_case = do_lower_case
        self.vocab_size = len(vocab)
        self._vocab_table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                list(vocab), tf.constant(list(vocab.values()), tf.int64)),
            default_value=-1)
        # Words over 200 characters become [UNK] below; no shorter word is cut by bytes.
        self._wordpiece = tf_text.WordpieceTokenizer(
            self._vocab_table, max_bytes_per_word=_MAX_CHARS_PER_WORD * _MAX_UTF8_BYTES_PER_CHAR,
            token_out_type=tf.int64, unknown_token=tokenization.UNK)
        self._tables = {key: tf.constant(value) for key, value in character_tables().items()}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def tokenize(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """Wordpiece ids of `texts` (tf.string [B]): int32 RaggedTensor [B, (tokens)]."""
        return self._tokenize(texts)[0]

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def tokenize_with_offsets(self, texts: tf.Tensor):
        """Wordpiece ids and code-point offsets of `texts` (tf.string [B]).

        Returns:
          (ids, begin, end): int32, int64, int64 RaggedTensors [B, (tokens)]; token t of
          row b covers code points begin[b, t] <= i < end[b, t] of the decoded input.
        """
        return self._tokenize(texts)

    def _tokenize(self, texts: tf.Tensor):
        """`tokenize_with_offsets` of texts (tf.string [B]), outside any tf.function."""
        chars = tf.strings.unicode_decode(texts, "UTF-8", errors="ignore")  # [B, (C)]
        codepoints = chars.flat_values
        rows = chars.value_rowids()
        positions = tf.range(tf.size(codepoints, out_type=tf.int64)) - tf.gather(
            chars.row_starts(), rows)
        classes = self._classes(codepoints)
        kept = (classes & REMOVE) == 0
        codepoints, rows, positions, classes = (
            tf.boolean_mask(x, kept) for x in (codepoints, rows, positions, classes))
        if self.do_lower_case:
            codepoints = self._apply_final_sigma(codepoints, rows, classes)
            source, codepoints = self._lower_and_strip_accents(codepoints)
        else:
            source = tf.range(tf.size(codepoints, out_type=tf.int64))
        words, word_rows, char_source = self._split_words(codepoints, source, rows, classes)
        ids, first_char, last_char, piece_rows = self._wordpieces(words, word_rows)
        num_rows = tf.shape(texts, out_type=tf.int64)[0]
        begin = tf.gather(positions, tf.gather(char_source, first_char))
        end = tf.gather(positions, tf.gather(char_source, last_char)) + 1
        return tuple(tf.RaggedTensor.from_value_rowids(x, piece_rows, nrows=num_rows)
                     for x in (ids, begin, end))

    def _classes(self, codepoints: tf.Tensor) -> tf.Tensor:
        """Class bits (int32 [N]) of code points (int32 [N])."""
        run = _searchsorted(self._tables["run_starts"], codepoints, side="right") - 1
        return tf.gather(self._tables["run_classes"], run)

    def _apply_final_sigma(self, codepoints, rows, classes) -> tf.Tensor:
        """Maps U+03A3 to the final form where Python's str.lower() would.

        Python lower-cases each whitespace token; a space is neither cased nor ignorable,
        so scanning for the nearest non-ignorable neighbour stops at token edges by itself.
        """
        size = tf.size(codepoints, out_type=tf.int64)
        anchor = (classes & CASE_IGNORABLE) == 0
        anchors = tf.concat([[-1], tf.where(anchor)[:, 0], [size]], axis=0)
        before = tf.cumsum(tf.cast(anchor, tf.int64), exclusive=True)
        previous = tf.gather(anchors, before)
        following = tf.gather(anchors, before + tf.cast(anchor, tf.int64) + 1)
        cased = tf.concat([(classes & CASED) != 0, [False]], axis=0)
        padded_rows = tf.concat([rows, [-1]], axis=0)

        def cased_in_row(index):
            index = tf.where(index < 0, size, index)
            return tf.gather(cased, index) & (tf.gather(padded_rows, index) == rows)

        final = ((codepoints == CAPITAL_SIGMA) & cased_in_row(previous)
                 & ~cased_in_row(following))
        return tf.where(final, FINAL_SIGMA, codepoints)

    def _lower_and_strip_accents(self, codepoints: tf.Tensor):
        """Replaces each code point by its lower-cased, accent-stripped expansion.

        Returns:
          (source, expanded): int64 [M] index of the input code point each output code
          point came from, and int32 [M] the output code points (combining marks vanish).
        """
        keys = self._tables["map_keys"]
        index = tf.minimum(_searchsorted(keys, codepoints), tf.cast(tf.size(keys) - 1, tf.int64))
        mapped = tf.gather(keys, index) == codepoints
        lengths = tf.where(mapped, tf.gather(self._tables["map_lengths"], index), 1)
        source = tf.repeat(tf.range(tf.size(codepoints, out_type=tf.int64)), lengths)
        within = tf.range(tf.size(source)) - tf.repeat(tf.cumsum(lengths, exclusive=True), lengths)
        from_map = tf.gather(mapped, source)
        value_index = tf.where(
            from_map, tf.gather(self._tables["map_starts"], tf.gather(index, source)) + within, 0)
        expanded = tf.where(from_map, tf.gather(self._tables["map_values"], value_index),
                            tf.gather(codepoints, source))
        return source, expanded

    def _split_words(self, codepoints, source, rows, classes):
        """Groups code points into the original's basic tokens.

        Words break at whitespace, around every punctuation character and around each CJK
        ideograph (with whatever its lower-cased form expanded to).

        Returns:
          (words, word_rows, char_source): int32 RaggedTensor [W, (chars)], int64 [W] the
          input row of each word, int64 [K] the source index of each word character.
        """
        source_classes = tf.gather(classes, source)
        space = (source_classes & SPACE) != 0
        cjk = (source_classes & CJK) != 0
        punct = (self._classes(codepoints) & PUNCT) != 0
        char_rows = tf.gather(rows, source)
        starts = ~space & (
            (char_rows != _previous(char_rows, -1)) | _previous(space, True)
            | punct | _previous(punct, True)
            | ((source != _previous(source, -1)) & (cjk | _previous(cjk, True))))
        codepoints, source, char_rows, starts = (
            tf.boolean_mask(x, ~space) for x in (codepoints, source, char_rows, starts))
        starts = tf.cast(starts, tf.int64)
        words = tf.RaggedTensor.from_value_rowids(
            codepoints, tf.cumsum(starts) - 1, nrows=tf.reduce_sum(starts))
        return words, tf.boolean_mask(char_rows, starts > 0), source

    def _wordpieces(self, words: tf.RaggedTensor, word_rows: tf.Tensor):
        """WordPiece ids of each word, with the word characters each piece spans.

        Args:
          words: int32 RaggedTensor [W, (chars)] of code points.
          word_rows: int64 [W], the input row of each word.

        Returns:
          (ids, first_char, last_char, piece_rows): int32 [T], int64 [T] indices into
          `words.flat_values` of each piece's first and last character, int64 [T] rows.
        """
        strings = tf.strings.unicode_encode(words, "UTF-8")  # [W]
        pieces, begin_bytes, end_bytes = self._wordpiece.tokenize_with_offsets(strings)
        piece_words = pieces.value_rowids()
        too_long = tf.gather(words.row_lengths() > _MAX_CHARS_PER_WORD, piece_words)
        first_piece = tf.range(tf.size(piece_words, out_type=tf.int64)) == tf.gather(
            pieces.row_starts(), piece_words)
        word_bytes = tf.gather(tf.cast(tf.strings.length(strings), tf.int64), piece_words)
        ids = tf.where(too_long, tf.constant(self.unk_id, tf.int64), pieces.flat_values)
        begin_bytes = tf.where(too_long, tf.constant(0, tf.int64), begin_bytes.flat_values)
        end_bytes = tf.where(too_long, word_bytes, end_bytes.flat_values)
        ids, begin_bytes, end_bytes, piece_words = (
            tf.boolean_mask(x, ~too_long | first_piece)
            for x in (ids, begin_bytes, end_bytes, piece_words))
        # Byte offsets inside a word's UTF-8 string -> indices of its characters.
        codepoints = words.flat_values
        char_bytes = 1 + sum(tf.cast(codepoints >= bound, tf.int64)
                             for bound in (0x80, 0x800, 0x10000))
        char_starts = tf.cumsum(char_bytes, exclusive=True)
        word_base = tf.gather(char_starts, tf.gather(words.row_starts(), piece_words))
        first_char = _searchsorted(char_starts, word_base + begin_bytes)
        last_char = _searchsorted(char_starts, word_base + end_bytes) - 1
        return tf.cast(ids, tf.int32), first_char, last_char, tf.gather(word_rows, piece_words)

    def pack(self, first_ids: tf.RaggedTensor, second_ids: tf.RaggedTensor | None,
             max_seq_length: int, pad_to_longest: bool = False) -> dict[str, tf.Tensor]:
        """Packs `[CLS] A [SEP] B [SEP]` as the original `convert_single_example`
        (`data.segment_layout.pack_segments`).

        Args:
          first_ids: int32 RaggedTensor [B, (tokens)], segment A.
          second_ids: int32 RaggedTensor [B, (tokens)], segment B, or None.
          max_seq_length: the longest packed sequence (at least 3); the output length T.
          pad_to_longest: pad only to the longest packed row instead (T at most
            max_seq_length).

        Returns:
          `input_ids`, `input_mask`, `segment_ids`: int32 [B, T], zero-padded.
        """
        return pack_segments(first_ids, second_ids, max_seq_length, pad_to_longest, self.cls_id,
                             self.sep_id)
