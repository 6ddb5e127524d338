"""A domain's words in a released vocabulary's `[unusedN]` slots (`build_vocab.py --extend_vocab`).

Google's vocabularies keep `[unusedN]` lines (994 in the uncased one) whose embedding rows no text
ever reaches. Writing words into those lines keeps the file's length and every other line, so the
released checkpoint still loads and every text without the new words tokenizes as before.

The words are `BasicTokenizer`'s, counted over the corpus with the vocabulary's casing. A word's
saving is how many tokens the corpus loses when the word joins the vocabulary: (its pieces - 1) x
its count, plus what it saves on the longer words that start with it, since WordPiece's greedy
longest match then takes it as their first piece. The words are chosen greedily, the largest
saving first, each saving counted on the vocabulary with the words already chosen. Left out:
words that are one piece already, words that tokenize to [UNK] (a character the vocabulary lacks),
and words whose addition would give a word of the corpus more pieces or turn it into [UNK].

What stays exactly as before: the tokens of every text none of whose words starts with a new
word. New words are whole words, never `##` pieces, so they can only be the first piece of a word
that starts with them.

Beside the vocabulary goes `<name>_extension.json`: for each new token its id and its pieces' ids
under the released vocabulary, from which `convert_checkpoint.py --vocab_extension` starts the new
embedding rows as the means of the pieces' rows.
"""
from __future__ import annotations

import bisect
import dataclasses
import heapq
import itertools
import json
import os
from typing import Iterable, Iterator, Mapping, Sequence

from data import tokenization
from utils.output_files import write_text_atomically, written_together


@dataclasses.dataclass(frozen=True)
class NewToken:
    """A word written into an [unusedN] slot."""

    # Its id: the line of the [unusedN] slot it takes.
    id: int
    token: str
    # Its pieces under the released vocabulary, and their ids.
    pieces: tuple[str, ...]
    piece_ids: tuple[int, ...]
    # How often the corpus holds it, and the tokens the corpus loses when it is added.
    count: int
    saving: int


@dataclasses.dataclass(frozen=True)
class Extension:
    """The extended vocabulary's lines and what went into its slots."""

    lines: list[str]
    new_tokens: list[NewToken]
    # Tokens of the corpus's words (an [UNK] word counting one) before and after the extension.
    tokens_before: int
    tokens_after: int
    words: int


def extension_path(vocab_path: str) -> str:
    """Where the extension file of a vocabulary goes: `vocab.txt` -> `vocab_extension.json`."""
    return os.path.splitext(vocab_path)[0] + "_extension.json"


def read_vocab_lines(path: str) -> list[str]:
    """The lines of a vocab.txt, split at "\\n" only (as `load_vocab`), kept as they are."""
    tokenization.load_vocab(path)  # one message for a missing, unreadable or non-UTF-8 file
    with open(path, "rb") as f:
        text = f.read().decode("utf-8")
    return text.split("\n")


def unused_slots(lines: Sequence[str]) -> list[int]:
    """Ids of the [unusedN] lines, in file order."""
    return [index for index, line in enumerate(lines)
            if tokenization.is_unused_token(line.strip())]


def _tokens(lines: Sequence[str]) -> dict[str, int]:
    """Token -> id as `load_vocab` reads the lines (no token after a final newline)."""
    count = len(lines) - 1 if lines and not lines[-1] else len(lines)
    return {line.strip(): index for index, line in enumerate(lines[:count])}


def check_casing(lines: Sequence[str], do_lower_case: bool, vocab_path: str) -> None:
    """Raises ValueError for a cased vocabulary (over 1% of its tokens hold capitals) extended
    with lower-cased words, which its model's tokenizer would never produce."""
    tokens = [token for token in _tokens(lines) if not token.startswith("[")]
    cased = sum(token != token.lower() for token in tokens)
    if do_lower_case and cased > 0.01 * len(tokens):
        raise ValueError(f"{vocab_path} is cased ({cased} tokens hold capitals) but "
                         "--do_lower_case=True lower-cases the corpus: pass --do_lower_case=False")


def free_slots(lines: Sequence[str], max_new_tokens: int | None,
               vocab_name: str = "the vocabulary") -> list[int]:
    """The [unusedN] lines the new words go to, in file order.

    Raises:
      ValueError: no [unusedN] line, or `max_new_tokens` negative or beyond them.
    """
    slots = unused_slots(lines)
    if not slots:
        raise ValueError(f"{vocab_name} has no [unusedN] slot to fill")
    if max_new_tokens is None:
        return slots
    if not 0 <= max_new_tokens <= len(slots):
        raise ValueError(f"max_new_tokens={max_new_tokens} must be in [0, {len(slots)}], the "
                         f"[unusedN] slots of {vocab_name}")
    return slots[:max_new_tokens]


class _GrowingVocab:
    """A vocabulary and the words added to it so far, as `WordpieceTokenizer` reads it.

    Iterating also yields every word that may be added, so that the tokenizer's bound on the
    longest piece covers them.
    """

    def __init__(self, vocab: Mapping[str, int], candidates: Iterable[str]):
        self.base = vocab
        self.candidates = list(candidates)
        self.added: set[str] = set()

    def __contains__(self, token: str) -> bool:
        return token in self.base or token in self.added

    def __iter__(self) -> Iterator[str]:
        return itertools.chain(self.base, self.candidates)


class _Selection:
    """The corpus's words, their current pieces, and the words chosen so far."""

    def __init__(self, vocab: Mapping[str, int], counts: Mapping[str, int]):
        self.counts = counts
        self.words = sorted(counts)
        old = tokenization.WordpieceTokenizer(vocab)
        # Current piece counts; None for a word that is [UNK].
        self.lengths = {word: _length(old.tokenize(word)) for word in self.words}
        self.candidates = [word for word in self.words if (self.lengths[word] or 1) > 1]
        self.vocab = _GrowingVocab(vocab, self.candidates)
        self.tokenizer = tokenization.WordpieceTokenizer(self.vocab)

    def words_starting_with(self, prefix: str) -> Iterator[str]:
        for index in range(bisect.bisect_left(self.words, prefix), len(self.words)):
            if not self.words[index].startswith(prefix):
                return
            yield self.words[index]

    def gain(self, word: str) -> tuple[int, dict[str, int | None]]:
        """The tokens the corpus loses once `word` is added, and the piece counts it gives the
        words starting with it; (0, {}) if one of them would get more pieces or become [UNK]."""
        self.vocab.added.add(word)
        try:
            lengths = {}
            for other in self.words_starting_with(word):
                before = self.lengths[other]
                after = _length(self.tokenizer.tokenize(other))
                if before is not None and (after is None or after > before):
                    return 0, {}
                lengths[other] = after
        finally:
            self.vocab.added.discard(word)
        saving = sum((self.lengths[other] - after) * self.counts[other]
                     for other, after in lengths.items() if self.lengths[other] is not None)
        return saving, lengths

    def add(self, word: str, lengths: Mapping[str, int | None]) -> None:
        self.vocab.added.add(word)
        self.lengths.update(lengths)


def _length(pieces: Sequence[str]) -> int | None:
    return None if pieces == [tokenization.UNK] else len(pieces)


def _choose(selection: _Selection, limit: int) -> list[tuple[str, int]]:
    """Greedy choice of up to `limit` words, the largest saving first (ties: the more frequent,
    then the first in code-point order), each saving recounted when its turn comes."""
    queue = []
    for word in selection.candidates:
        saving, _ = selection.gain(word)
        if saving > 0:
            queue.append((-saving, -selection.counts[word], word))
    heapq.heapify(queue)
    chosen = []
    while queue and len(chosen) < limit:
        _, negative_count, word = heapq.heappop(queue)
        saving, lengths = selection.gain(word)
        if saving <= 0:
            continue
        if queue and (-saving, negative_count, word) > queue[0]:
            heapq.heappush(queue, (-saving, negative_count, word))  # others now save more
            continue
        selection.add(word, lengths)
        chosen.append((word, saving))
    return chosen


def extend_vocabulary(lines: Sequence[str], counts: Mapping[str, int],
                      max_new_tokens: int | None = None,
                      vocab_name: str = "the vocabulary") -> Extension:
    """Writes the corpus's words that save the most tokens into the [unusedN] lines.

    Args:
      lines: the released vocabulary's lines (`read_vocab_lines`).
      counts: how often each `BasicTokenizer` word occurs in the corpus (`count_words`).
      max_new_tokens: the most words to add; None: as many as there are [unusedN] slots.
      vocab_name: how messages name the vocabulary.

    Raises:
      ValueError: no [unusedN] slot, `max_new_tokens` beyond them or negative, no word counted.
    """
    slots = free_slots(lines, max_new_tokens, vocab_name)
    if not counts:
        raise ValueError("the input holds no word to add to the vocabulary")
    vocab = _tokens(lines)
    selection = _Selection(vocab, counts)
    before = sum(count * (selection.lengths[word] or 1) for word, count in counts.items())
    chosen = _choose(selection, len(slots))
    new_lines = list(lines)
    new_tokens = []
    old = tokenization.WordpieceTokenizer(vocab)
    for slot, (word, saving) in zip(slots, chosen):
        new_lines[slot] = word + lines[slot][len(lines[slot].rstrip()):]
        pieces = old.tokenize(word)
        new_tokens.append(NewToken(slot, word, tuple(pieces), tuple(vocab[p] for p in pieces),
                                   counts[word], saving))
    after = sum(count * (selection.lengths[word] or 1) for word, count in counts.items())
    return Extension(new_lines, new_tokens, before, after, sum(counts.values()))


def write_extension(extension: Extension, vocab_path: str, base_vocab_path: str,
                    do_lower_case: bool) -> str:
    """Writes the extended vocab.txt and its `_extension.json` together, atomically.

    Returns:
      The path of the extension file.
    """
    header = json.dumps({"vocab_file": os.path.basename(vocab_path),
                         "base_vocab_file": os.path.abspath(base_vocab_path),
                         "do_lower_case": do_lower_case}, ensure_ascii=False)
    # One new token a line.
    new_tokens = ",\n".join(json.dumps(dataclasses.asdict(token), ensure_ascii=False)
                            for token in extension.new_tokens)
    path = extension_path(vocab_path)
    with written_together():
        write_text_atomically(vocab_path, "\n".join(extension.lines))
        write_text_atomically(path, f'{header[:-1]}, "new_tokens": [\n{new_tokens}\n]}}\n')
    return path


def read_extension(path: str, vocab_file: str) -> dict[int, tuple[int, ...]]:
    """The new tokens' ids and their pieces' ids, from an extension file, checked against the
    model's vocabulary.

    Raises:
      ValueError: the file is not an extension file, or `vocab_file` does not hold the new tokens
        at their ids.
      OSError: the file cannot be read.
    """
    with open(path, encoding="utf-8") as f:
        try:
            new_tokens = json.load(f)["new_tokens"]
            pieces = {int(t["id"]): tuple(int(i) for i in t["piece_ids"]) for t in new_tokens}
            tokens = {int(t["id"]): str(t["token"]) for t in new_tokens}
        except (ValueError, KeyError, TypeError) as error:
            raise ValueError(f"{path} is not a vocabulary extension written by build_vocab.py "
                             f"--extend_vocab ({type(error).__name__}: {error})") from None
    vocab = tokenization.load_vocab(vocab_file)
    lines = {index: token for token, index in vocab.items()}
    for token_id, token in sorted(tokens.items()):
        found = lines.get(token_id)
        if found != token:
            where = f"no id {token_id}" if found is None else f"{found!r} at id {token_id}"
            raise ValueError(f"{vocab_file} has {where} where {path} puts {token!r}: pass the "
                             "extended vocabulary as --vocab_file")
    return pieces
