"""Learns a BERT WordPiece vocabulary (vocab.txt) from text.

Words are the original `BasicTokenizer`'s output (cleaning, CJK splitting, optional lower-casing
and accent stripping, punctuation splitting), so `FullTokenizer` later splits text into exactly
the words the vocabulary was learned on. TensorFlow Text's WordPiece learner
(`wordpiece_tokenizer_learner_lib.learn`, the algorithm behind `bert_vocab_from_dataset`) picks
the pieces; every single character of its alphabet is kept, alone and as a `##` piece, so only
characters outside the alphabet (at most `max_unique_chars` of the most frequent ones) and words
over 200 characters become [UNK].

The file starts with [PAD], [UNK], [CLS], [SEP], [MASK] (ids 0-4), then optional
[unused0], [unused1], ... slots for tokens a user adds later, then the learned pieces.
"""
from __future__ import annotations

import collections
import dataclasses
import functools
import importlib.util
import os
import types
from typing import Iterable, Iterator, Sequence

from data import tokenization
from utils.output_files import write_text_atomically

SPECIAL_TOKENS = tokenization.SPECIAL_TOKENS


@dataclasses.dataclass(frozen=True)
class LearnerOptions:
    """Settings of TensorFlow Text's learner (see `wordpiece_tokenizer_learner_lib.learn`).

    Attributes:
      vocab_size: the most tokens in the file, special and unused ones included.
      num_unused_tokens: [unusedN] slots after the special tokens.
      max_unique_chars: alphabet size; rarer characters become [UNK].
      max_token_length: longer words do not count towards the pieces.
      lower_thresh: smallest count threshold the search for the vocabulary size may reach.
      num_iterations: refinement passes per threshold tried.
      slack_ratio: accepted shortfall from vocab_size, as a share of it.
    """

    vocab_size: int = 30522
    num_unused_tokens: int = 0
    max_unique_chars: int = 1000
    max_token_length: int = 50
    lower_thresh: int = 10
    num_iterations: int = 4
    slack_ratio: float = 0.05

    def validate(self) -> None:
        """Raises ValueError naming the first out-of-range setting."""
        reserved = len(SPECIAL_TOKENS) + self.num_unused_tokens
        if self.num_unused_tokens < 0:
            raise ValueError(f"num_unused_tokens={self.num_unused_tokens} must be >= 0")
        if self.vocab_size <= reserved:
            raise ValueError(f"vocab_size={self.vocab_size} must exceed the {reserved} special "
                             "and unused tokens")
        if self.max_unique_chars < 1 or self.max_token_length < 1 or self.num_iterations < 1:
            raise ValueError("max_unique_chars, max_token_length and num_iterations must be >= 1")
        if self.lower_thresh < 1:
            raise ValueError(f"lower_thresh={self.lower_thresh} must be >= 1")
        if not 0.0 <= self.slack_ratio < 1.0:
            raise ValueError(f"slack_ratio={self.slack_ratio} must be in [0, 1)")


def read_lines(paths: Sequence[str], max_lines: int = 0) -> Iterator[str]:
    """Lines of the files in order (UTF-8, undecodable bytes dropped); `max_lines` if > 0."""
    count = 0
    for path in paths:
        with open(path, "rb") as reader:
            for raw_line in reader:
                if max_lines and count >= max_lines:
                    return
                count += 1
                yield tokenization.convert_to_unicode(raw_line)


def count_words(lines: Iterable[str], do_lower_case: bool) -> collections.Counter:
    """How often each `BasicTokenizer` word occurs in `lines`."""
    tokenizer = tokenization.BasicTokenizer(do_lower_case=do_lower_case)
    counts: collections.Counter = collections.Counter()
    for line in lines:
        counts.update(tokenizer.tokenize(line))
    return counts


@functools.lru_cache(maxsize=1)
def _wordpiece_learner() -> types.ModuleType:
    """TensorFlow Text's `wordpiece_tokenizer_learner_lib`, loaded from its file.

    The module is plain Python and NumPy, but importing it by name runs `tensorflow_text`'s
    `__init__`, which loads TensorFlow: seconds and half a gigabyte that build_vocab.py does not
    need.
    """
    package = importlib.util.find_spec("tensorflow_text")  # finds it without running it
    if package is None or not package.submodule_search_locations:
        raise ImportError("tensorflow-text is not installed (requirements.txt)")
    path = os.path.join(package.submodule_search_locations[0], "tools", "wordpiece_vocab",
                        "wordpiece_tokenizer_learner_lib.py")
    spec = importlib.util.spec_from_file_location("_wordpiece_tokenizer_learner_lib", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def learn_vocabulary(word_counts: collections.Counter, options: LearnerOptions) -> list[str]:
    """The vocabulary, special and unused tokens first, at most `options.vocab_size` tokens.

    Raises:
      ValueError: the options are out of range or there is no word to learn from.
    """
    learner = _wordpiece_learner()
    options.validate()
    if not word_counts:
        raise ValueError("the input holds no word to learn a vocabulary from")
    reserved = list(SPECIAL_TOKENS) + [f"[unused{i}]" for i in range(options.num_unused_tokens)]
    learned = learner.learn(
        list(word_counts.items()), options.vocab_size, reserved,
        lower_thresh=options.lower_thresh, num_iterations=options.num_iterations,
        max_token_length=options.max_token_length, max_unique_chars=options.max_unique_chars,
        slack_ratio=options.slack_ratio, include_joiner_token=True, joiner="##")
    pieces = [token for token in learned if token not in set(reserved)]
    return (reserved + pieces)[:options.vocab_size]


def write_vocabulary(tokens: Sequence[str], path: str) -> None:
    """Writes one token per line, atomically (a temporary file renamed into place)."""
    write_text_atomically(path, "".join(f"{token}\n" for token in tokens))
