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
import itertools
import re

from data import tokenization

# Characters that `str.split()` splits on but the original's cleaning deletes (no Python
# whitespace lies above U+3000).
JOINING_CONTROL_CHARS = "".join(
    chr(cp) for cp in range(0x3001)
    if chr(cp).isspace() and tokenization.is_control(chr(cp)))
_JOINING_CONTROL_RE = re.compile(f"[{re.escape(JOINING_CONTROL_CHARS)}]")


class _WordIds(dict):
    """word -> tuple of token ids, filled on first use."""

    def __init__(self, tokenizer: tokenization.FullTokenizer):
        super().__init__()
        self._tokenizer = tokenizer

    def __missing__(self, word: str) -> tuple[int, ...]:
        ids = tuple(self._tokenizer.convert_tokens_to_ids(self._tokenizer.tokenize(word)))
        self[word] = ids
        return ids


class WordCachedTokenizer:
    """Token ids exactly as `FullTokenizer.tokenize` + `convert_tokens_to_ids` give them."""

    def __init__(self, tokenizer: tokenization.FullTokenizer, max_cached_words: int = 400_000):
        """Wraps `tokenizer`.

        Args:
          tokenizer: the tokenizer whose output is reproduced.
          max_cached_words: the memo is emptied when it grows past this many words, which
            bounds its memory (roughly 250 bytes a word).
        """
        self.tokenizer = tokenizer
        self.max_cached_words = max_cached_words
        self._word_ids = _WordIds(tokenizer)

    def ids(self, line: str) -> list[int]:
        """The token ids of one line of text."""
        if _JOINING_CONTROL_RE.search(line):
            return self.tokenizer.convert_tokens_to_ids(self.tokenizer.tokenize(line))
        if len(self._word_ids) > self.max_cached_words:
            self._word_ids.clear()
        return list(itertools.chain.from_iterable(map(self._word_ids.__getitem__, line.split())))

    def extend_ids(self, line: str, token_ids: array.array) -> None:
        """Appends the token ids of one line of text to `token_ids`."""
        if _JOINING_CONTROL_RE.search(line):
            token_ids.extend(self.ids(line))
            return
        if len(self._word_ids) > self.max_cached_words:
            self._word_ids.clear()
        token_ids.extend(itertools.chain.from_iterable(map(self._word_ids.__getitem__,
                                                           line.split())))
