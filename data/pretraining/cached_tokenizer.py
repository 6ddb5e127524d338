"""`FullTokenizer` ids of a line, memoised per whitespace-delimited word.

The original tokenizer cleans the text, then splits it on whitespace, and every later step
(accent stripping, punctuation and CJK splitting, WordPiece) works within one whitespace-delimited
word. So tokenizing each word of `line.split()` alone and concatenating gives the same tokens as
tokenizing the line, with one exception: a control character that Python counts as whitespace
(U+000B, U+000C, U+001C..U+001F, U+0085) splits `str.split()` but is deleted by the cleaning, which
joins its neighbours. Lines holding one are tokenized whole. Corpora repeat words heavily, so the
memo turns most of the tokenizer's work into dictionary lookups.
"""
from __future__ import annotations

import array
import re

from data import tokenization

# Characters that `str.split()` splits on but the original's cleaning deletes (no Python
# whitespace lies above U+3000).
JOINING_CONTROL_CHARS = "".join(
    chr(cp) for cp in range(0x3001)
    if chr(cp).isspace() and tokenization.is_control(chr(cp)))
_JOINING_CONTROL_RE = re.compile(f"[{re.escape(JOINING_CONTROL_CHARS)}]")


class _PieceIds(dict):
    """`BasicTokenizer` token -> the ids of its WordPiece pieces (int32 bytes), on first use."""

    def __init__(self, tokenizer: tokenization.FullTokenizer):
        super().__init__()
        self._tokenizer = tokenizer

    def __missing__(self, token: str) -> bytes:
        pieces = self._tokenizer.wordpiece_tokenizer.tokenize(token)
        self[token] = packed = array.array(
            "i", self._tokenizer.convert_tokens_to_ids(pieces)).tobytes()
        return packed


class _WordIds(dict):
    """word -> its token ids as the bytes of an int32 array, filled on first use.

    `FullTokenizer.tokenize` is `WordpieceTokenizer` applied to each `BasicTokenizer` token, so
    a new word costs a basic tokenization and lookups of its tokens' pieces.
    """

    def __init__(self, tokenizer: tokenization.FullTokenizer):
        super().__init__()
        self._basic_tokenize = tokenizer.basic_tokenizer.tokenize
        self._piece_ids = _PieceIds(tokenizer)

    def __missing__(self, word: str) -> bytes:
        self[word] = packed = b"".join(map(self._piece_ids.__getitem__,
                                           self._basic_tokenize(word)))
        return packed

    def clear(self) -> None:
        super().clear()
        self._piece_ids.clear()


class WordCachedTokenizer:
    """Token ids exactly as `FullTokenizer.tokenize` + `convert_tokens_to_ids` give them."""

    def __init__(self, tokenizer: tokenization.FullTokenizer, max_cached_words: int = 400_000):
        """Wraps `tokenizer`.

        Args:
          tokenizer: the tokenizer whose output is reproduced.
          max_cached_words: the memo is emptied when it grows past this many words, which
            bounds its memory (roughly 200 bytes a word).
        """
        self.tokenizer = tokenizer
        self.max_cached_words = max_cached_words
        self._word_ids = _WordIds(tokenizer)

    def extend_ids(self, line: str, token_ids: array.array) -> None:
        """Appends the token ids of one line of text to `token_ids` (an int32 array)."""
        if _JOINING_CONTROL_RE.search(line):
            ids = self.tokenizer.convert_tokens_to_ids(self.tokenizer.tokenize(line))
            token_ids.extend(ids)
            return
        if len(self._word_ids) > self.max_cached_words:
            self._word_ids.clear()
        token_ids.frombytes(b"".join(map(self._word_ids.__getitem__, line.split())))

    def ids(self, line: str) -> list[int]:
        """The token ids of one line of text."""
        token_ids = array.array("i")
        self.extend_ids(line, token_ids)
        return token_ids.tolist()
