"""WordPiece tokenization exactly as Google's original BERT `tokenization.py`.

Pure Python (no TensorFlow), so data preparation can run in plain worker processes.
`FullTokenizer` = `BasicTokenizer` (clean, split CJK, lower-case and strip accents,
split punctuation) followed by greedy longest-match-first `WordpieceTokenizer`.

Per-character decisions go through lazily filled translation tables (`str.translate`
with a caching mapping), so each distinct character is classified once per process.
"""
from __future__ import annotations

import collections
import os
import re
import unicodedata
from typing import Callable, Iterable

# Released model names (checkpoint folder names) and the casing they were trained with.
_LOWER_CASED_MODELS = (
    "uncased_L-24_H-1024_A-16",
    "uncased_L-12_H-768_A-12",
    "multilingual_L-12_H-768_A-12",
    "chinese_L-12_H-768_A-12",
)
_CASED_MODELS = (
    "cased_L-12_H-768_A-12",
    "cased_L-24_H-1024_A-16",
    "multi_cased_L-12_H-768_A-12",
)
_UNUSED_TOKEN_RE = re.compile(r"^\[unused\d+\]$")

# The special tokens of BERT's vocabularies, in the order a vocab.txt starts with them.
PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
SPECIAL_TOKENS = (PAD, UNK, CLS, SEP, MASK)

# The original's CJK Unified Ideograph blocks; Hangul, Hiragana and Katakana are not in them.
_CJK_RANGES = (
    (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
)


def validate_case_matches_checkpoint(do_lower_case: bool, init_checkpoint: str | None) -> None:
    """Raises ValueError if `do_lower_case` contradicts a released checkpoint's folder name."""
    if not init_checkpoint:
        return
    match = re.match("^.*?([A-Za-z0-9_-]+)/bert_model.ckpt", init_checkpoint)
    if match is None:
        return
    model_name = match.group(1)
    if model_name in _LOWER_CASED_MODELS and not do_lower_case:
        actual_flag, case_name, opposite_flag = "False", "lowercased", "True"
    elif model_name in _CASED_MODELS and do_lower_case:
        actual_flag, case_name, opposite_flag = "True", "cased", "False"
    else:
        return
    raise ValueError(
        "You passed in `--do_lower_case=%s` with `--init_checkpoint=%s`. "
        "However, `%s` seems to be a %s model, so you "
        "should pass in `--do_lower_case=%s` so that the fine-tuning matches "
        "how the model was pre-training. If this error is wrong, please "
        "just comment out this check." % (actual_flag, init_checkpoint,
                                          model_name, case_name, opposite_flag))


def convert_to_unicode(text: str | bytes) -> str:
    """Returns `text` as str; bytes are UTF-8 with undecodable bytes dropped."""
    if isinstance(text, str):
        return text
    if isinstance(text, bytes):
        return text.decode("utf-8", "ignore")
    raise ValueError("Unsupported string type: %s" % (type(text)))


def printable_text(text: str | bytes) -> str:
    """Returns `text` in a form suitable for printing or logging (str in Python 3)."""
    return convert_to_unicode(text)


def load_vocab(vocab_file: str | os.PathLike) -> collections.OrderedDict[str, int]:
    """Reads a vocabulary file (one token per line, id = line number) into an OrderedDict.

    Raises:
      ValueError: the file cannot be read or a line is not valid UTF-8.
    """
    try:
        with open(vocab_file, "rb") as reader:
            data = reader.read()
    except OSError as error:
        raise ValueError(f"cannot read vocab file {vocab_file}: {error}") from error
    vocab = collections.OrderedDict()
    # Lines end at "\n" only (as tf.io.gfile's readline); a duplicate keeps the later id.
    for index, line in enumerate(_split_lines(data)):
        try:
            token = line.decode("utf-8")
        except UnicodeDecodeError as error:
            raise ValueError(f"{vocab_file}:{index + 1}: not valid UTF-8 ({error})") from error
        vocab[token.strip()] = index
    return vocab


def _split_lines(data: bytes) -> list[bytes]:
    """Splits file content at b"\\n", with no empty piece after a final newline."""
    lines = data.split(b"\n")
    if lines and not lines[-1]:
        lines.pop()
    return lines


def convert_by_vocab(vocab: dict, items: Iterable) -> list:
    """Maps each item through `vocab` (tokens to ids or ids to tokens)."""
    output = []
    for item in items:
        if item not in vocab:
            raise KeyError(f"{item!r} is not in the vocabulary")
        output.append(vocab[item])
    return output


def whitespace_tokenize(text: str) -> list[str]:
    """Strips `text` and splits it on runs of whitespace."""
    return text.split()


def is_whitespace(char: str) -> bool:
    """True for space, tab, newline, carriage return and category Zs."""
    if char in (" ", "\t", "\n", "\r"):
        return True
    return unicodedata.category(char) == "Zs"


def is_control(char: str) -> bool:
    """True for categories Cc and Cf, except tab, newline and carriage return."""
    if char in ("\t", "\n", "\r"):
        return False
    return unicodedata.category(char) in ("Cc", "Cf")


def is_punctuation(char: str) -> bool:
    """True for all non-alphanumeric ASCII and every Unicode P* category."""
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def is_chinese_char(cp: int) -> bool:
    """True if code point `cp` is in one of the original's CJK ideograph blocks."""
    return any(low <= cp <= high for low, high in _CJK_RANGES)


class _TranslationCache(dict):
    """`str.translate` table computing each code point's replacement on first use."""

    def __init__(self, rule: Callable[[str], str | None]):
        super().__init__()
        self._rule = rule

    def __missing__(self, cp: int) -> str | None:
        self[cp] = replacement = self._rule(chr(cp))
        return replacement


def _clean_and_space_cjk(char: str) -> str | None:
    """Drops NUL, U+FFFD and controls, maps whitespace to a space, isolates CJK ideographs."""
    cp = ord(char)
    if cp == 0 or cp == 0xFFFD or is_control(char):
        return None
    if is_whitespace(char):
        return " "
    if is_chinese_char(cp):
        return f" {char} "
    return char


def _space_punctuation(char: str) -> str:
    return f" {char} " if is_punctuation(char) else char


_CLEAN_TABLE = _TranslationCache(_clean_and_space_cjk)
_PUNCTUATION_TABLE = _TranslationCache(_space_punctuation)
_ASCII_PUNCTUATION_RE = re.compile(r"[!-/:-@\[-`{-~]")


def strip_accents(text: str) -> str:
    """Removes combining marks (category Mn) after canonical decomposition."""
    if text.isascii():
        return text
    decomposed = unicodedata.normalize("NFD", text)
    return "".join(char for char in decomposed if unicodedata.category(char) != "Mn")


class BasicTokenizer:
    """Cleans text, splits on whitespace and punctuation, optionally lower-cases."""

    def __init__(self, do_lower_case: bool = True, vocab: Iterable[str] = (),
                 preserve_unused_tokens: bool = False):
        """Builds the tokenizer.

        Args:
          do_lower_case: lower-case and strip accents.
          vocab: tokens that may be preserved (only used with `preserve_unused_tokens`).
          preserve_unused_tokens: keep whitespace-delimited `[unusedN]` vocab tokens whole
            (the option of the `bert-tensorflow` 1.0.4 package).
        """
        self.do_lower_case = do_lower_case
        self.vocab = vocab
        self.preserve_unused_tokens = preserve_unused_tokens

    def tokenize(self, text: str | bytes) -> list[str]:
        """Returns the basic tokens of `text`."""
        text = convert_to_unicode(text).translate(_CLEAN_TABLE)
        output_tokens = []
        for token in text.split():
            if self.preserve_unused_tokens and _is_preserved(token, self.vocab):
                output_tokens.append(token)
                continue
            if self.do_lower_case:
                token = strip_accents(token.lower())
                if not token:  # the word was only combining marks
                    continue
            if token.isascii():
                if _ASCII_PUNCTUATION_RE.search(token) is None:
                    output_tokens.append(token)
                    continue
            output_tokens.extend(token.translate(_PUNCTUATION_TABLE).split())
        return output_tokens


def is_unused_token(token: str) -> bool:
    """True for the `[unusedN]` slots of BERT's vocabularies."""
    return _UNUSED_TOKEN_RE.search(token) is not None


def _is_preserved(token: str, vocab: Iterable[str]) -> bool:
    return token in vocab and is_unused_token(token)


class WordpieceTokenizer:
    """Greedy longest-match-first WordPiece; continuation pieces carry a `##` prefix."""

    def __init__(self, vocab: dict[str, int], unk_token: str = UNK,
                 max_input_chars_per_word: int = 200):
        self.vocab = vocab
        self.unk_token = unk_token
        self.max_input_chars_per_word = max_input_chars_per_word
        # No vocab entry is longer than this, so longer candidate pieces need no lookup.
        self._max_piece_chars = max((len(token) for token in vocab), default=0)

    def tokenize(self, text: str | bytes) -> list[str]:
        """Splits each whitespace-delimited word of `text` into WordPiece tokens.

        A word longer than `max_input_chars_per_word`, or one that cannot be covered by
        vocabulary pieces, becomes a single `unk_token`.
        """
        output_tokens = []
        for token in convert_to_unicode(text).split():
            if len(token) > self.max_input_chars_per_word:
                output_tokens.append(self.unk_token)
            elif token in self.vocab:
                output_tokens.append(token)
            else:
                output_tokens.extend(self._split_word(token))
        return output_tokens

    def _split_word(self, token: str) -> list[str]:
        pieces = []
        start = 0
        while start < len(token):
            prefix = "##" if start > 0 else ""
            end = min(len(token), start + self._max_piece_chars)
            while end > start and prefix + token[start:end] not in self.vocab:
                end -= 1
            if end == start:
                return [self.unk_token]
            pieces.append(prefix + token[start:end])
            start = end
        return pieces


class FullTokenizer:
    """End-to-end tokenization: `BasicTokenizer` then `WordpieceTokenizer`."""

    def __init__(self, vocab_file: str | os.PathLike, do_lower_case: bool = True,
                 preserve_unused_tokens: bool = False):
        self.vocab = load_vocab(vocab_file)
        self.inv_vocab = {index: token for token, index in self.vocab.items()}
        self.basic_tokenizer = BasicTokenizer(
            do_lower_case=do_lower_case, vocab=self.vocab,
            preserve_unused_tokens=preserve_unused_tokens)
        self.wordpiece_tokenizer = WordpieceTokenizer(vocab=self.vocab)

    def tokenize(self, text: str | bytes) -> list[str]:
        """Returns the WordPiece tokens of `text`."""
        split_tokens = []
        for token in self.basic_tokenizer.tokenize(text):
            split_tokens.extend(self.wordpiece_tokenizer.tokenize(token))
        return split_tokens

    def convert_tokens_to_ids(self, tokens: Iterable[str]) -> list[int]:
        return convert_by_vocab(self.vocab, tokens)

    def convert_ids_to_tokens(self, ids: Iterable[int]) -> list[str]:
        return convert_by_vocab(self.inv_vocab, ids)
