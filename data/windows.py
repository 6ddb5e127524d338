"""Overlapping windows over a token sequence longer than the model's input, as the original
`run_squad.py` cuts a long context (google-research/bert#66 advises the same for any long text).

Windows of at most `max_tokens` tokens start every `stride` tokens until one reaches the end. A
token seen by several windows belongs to the one where it has the most context: the highest
min(tokens on its left, tokens on its right) + 0.01 * the window's length, the earliest window on
a tie (the original's `_check_is_max_context`). SQuAD lets only that window start an answer there;
NER takes a word's tag from the window of its first piece.
"""
from __future__ import annotations

import dataclasses
from typing import Sequence


@dataclasses.dataclass(frozen=True)
class Span:
    """Tokens `start` to `start + length - 1` of the sequence."""

    start: int
    length: int

    @property
    def end(self) -> int:
        """One past the last token."""
        return self.start + self.length


def spans(num_tokens: int, max_tokens: int, stride: int) -> list[Span]:
    """The windows over `num_tokens` tokens: none for none, one when they fit in `max_tokens`.

    A stride longer than a window moves by the window's length: no token is skipped.
    """
    if max_tokens < 1 or stride < 1:
        raise ValueError(f"windows need max_tokens ({max_tokens}) and stride ({stride}) of at "
                         "least 1")
    found = []
    start = 0
    while start < num_tokens:
        length = min(num_tokens - start, max_tokens)
        found.append(Span(start, length))
        if start + length == num_tokens:
            break
        start += min(length, stride)
    return found


def max_context_spans(windows: Sequence[Span], num_tokens: int) -> list[int]:
    """For each of `num_tokens` tokens, the index of its window of most context (-1 if none)."""
    best_scores: list[float | None] = [None] * num_tokens
    best_spans = [-1] * num_tokens
    for index, span in enumerate(windows):
        last = span.end - 1
        for position in range(span.start, span.end):
            score = min(position - span.start, last - position) + 0.01 * span.length
            best = best_scores[position]
            if best is None or score > best:
                best_scores[position] = score
                best_spans[position] = index
    return best_spans


def default_stride(max_tokens: int) -> int:
    """Half a window: each token away from the ends has a quarter window of context or more on
    each side in its window of most context."""
    return max(1, max_tokens // 2)


def pair_windows(tokens_a: Sequence[str], tokens_b: Sequence[str], max_tokens: int,
                 stride: int | None = None) -> list[tuple[list[str], list[str]]]:
    """Windows of a text, or of a pair's longer side, for sequences of `max_tokens` text tokens.

    A text (pair) that fits is one window, as it is. Otherwise a single text is cut into
    windows; a pair keeps its shorter side (B on a tie is the longer, as the original's
    longest-first truncation pops B first), cut to at most half of `max_tokens`, in every
    window, and its longer side is cut into windows of the room left.

    Args:
        tokens_a: WordPiece tokens of the text, or of a pair's first text.
        tokens_b: Those of its second text; empty for a single text.
        max_tokens: Text tokens of a sequence, without `[CLS]` and `[SEP]`s.
        stride: Tokens between window starts; None: half a window (`default_stride`).

    Returns:
        `(a, b)` token lists of each window, in order.

    Raises:
        ValueError: a long pair and `max_tokens` < 2 (no room for a token of each side).
    """
    tokens_a, tokens_b = list(tokens_a), list(tokens_b)
    if len(tokens_a) + len(tokens_b) <= max_tokens:
        return [(tokens_a, tokens_b)]
    if not tokens_b:
        return [(tokens_a[s.start:s.end], []) for s in
                spans(len(tokens_a), max_tokens, stride or default_stride(max_tokens))]
    if max_tokens < 2:
        raise ValueError(f"a pair needs windows of at least 2 tokens, not {max_tokens}")
    a_is_longer = len(tokens_a) > len(tokens_b)
    kept, windowed = (tokens_b, tokens_a) if a_is_longer else (tokens_a, tokens_b)
    kept = kept[:max_tokens // 2]
    width = max_tokens - len(kept)
    pieces = [windowed[s.start:s.end] for s in
              spans(len(windowed), width, stride or default_stride(width))]
    return [(piece, kept) if a_is_longer else (kept, piece) for piece in pieces]
