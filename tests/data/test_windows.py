"""Tests of data/windows.py: SQuAD's windows and max-context rule, and the windows of a text or a
pair for classification. (`tests/data/squad/test_features.py` checks SQuAD's features built on them
against the original's.)"""
import pytest

from data import windows
from data.windows import Span


def test_windows_start_every_stride_until_one_reaches_the_end():
    assert windows.spans(12, 5, 2) == [Span(0, 5), Span(2, 5), Span(4, 5), Span(6, 5),
                                       Span(8, 4)]
    assert windows.spans(5, 5, 2) == [Span(0, 5)]
    assert windows.spans(0, 5, 2) == []
    # A stride longer than a window moves by the window: no token is left out.
    assert windows.spans(7, 3, 10) == [Span(0, 3), Span(3, 3), Span(6, 1)]
    assert Span(6, 1).end == 7
    with pytest.raises(ValueError, match="at least 1"):
        windows.spans(7, 3, 0)


def test_each_token_belongs_to_its_window_of_most_context():
    # min(left, right) + 0.01 * length, the earliest window on a tie: token 3 scores 1.05 in
    # windows 0 and 1; token 9 scores 1.05 in window 3 and 1.04 in the shorter window 4.
    spans = windows.spans(12, 5, 2)
    assert windows.max_context_spans(spans, 12) == [0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert windows.max_context_spans([Span(1, 2)], 4) == [-1, 0, 0, -1]


def test_default_stride_is_half_a_window():
    assert [windows.default_stride(n) for n in (1, 2, 126, 127)] == [1, 1, 63, 63]


_A = [f"a{i}" for i in range(10)]
_B = [f"b{i}" for i in range(3)]


def test_a_text_or_pair_that_fits_is_one_window_as_it_is():
    assert windows.pair_windows(_A, [], 10) == [(_A, [])]
    assert windows.pair_windows(_A[:7], _B, 10) == [(_A[:7], _B)]


def test_a_long_text_is_cut_into_windows():
    assert windows.pair_windows(_A, [], 4, stride=3) == [
        (_A[0:4], []), (_A[3:7], []), (_A[6:10], [])]
    # Default: half a window.
    assert [a[0] for a, _ in windows.pair_windows(_A, [], 4)] == ["a0", "a2", "a4", "a6"]


def test_a_long_pair_keeps_its_shorter_side_in_every_window():
    assert windows.pair_windows(_A, _B, 7, stride=2) == [
        (_A[0:4], _B), (_A[2:6], _B), (_A[4:8], _B), (_A[6:10], _B)]
    assert windows.pair_windows(_B, _A, 7, stride=2)[1] == (_B, _A[2:6])
    # Both sides long: the kept one is cut to half the room. On a tie B is windowed.
    found = windows.pair_windows(_A, _A, 6, stride=3)
    assert found == [(_A[:3], _A[0:3]), (_A[:3], _A[3:6]), (_A[:3], _A[6:9]),
                     (_A[:3], _A[9:10])]
    with pytest.raises(ValueError, match="at least 2"):
        windows.pair_windows(_A, _B, 1)
