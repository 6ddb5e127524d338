"""Periodic progress lines (count, rate, ETA) for long loops, and a closing summary."""
from __future__ import annotations

import time
from typing import Callable

from absl import logging


class Progress:
    """Logs `what: done/total (pct) rate/s, ETA` at most every `interval` seconds.

    Args:
        what: what is counted, e.g. "examples".
        total: expected count, or None when unknown (no percentage or ETA then).
        interval: seconds between lines.
        log: where lines go (absl logging.info by default).
    """

    def __init__(self, what: str, total: int | None = None, interval: float = 10.0,
                 log: Callable[[str], None] = logging.info, clock=time.monotonic):
        self.what = what
        self.total = total
        self.interval = interval
        self.count = 0
        self._log = log
        self._clock = clock
        self._start = clock()
        self._last = self._start

    def update(self, n: int = 1) -> None:
        self.count += n
        now = self._clock()
        if now - self._last >= self.interval:
            self._last = now
            self._log(self.line(now))

    def elapsed(self, now: float | None = None) -> float:
        """Seconds since the start."""
        return max((now if now is not None else self._clock()) - self._start, 1e-9)

    def eta(self, now: float | None = None) -> float | None:
        """Seconds left at the mean rate so far; None without a total or before the first count."""
        rate = self.count / self.elapsed(now)
        return (self.total - self.count) / rate if self.total and rate > 0 else None

    def line(self, now: float | None = None) -> str:
        now = now if now is not None else self._clock()
        text = f"{self.what}: {self.count}"
        if self.total:
            text += f"/{self.total} ({100.0 * self.count / self.total:.1f}%)"
        text += f", {self.count / self.elapsed(now):.1f}/s"
        eta = self.eta(now)
        if eta is not None:
            text += f", ETA {format_seconds(eta)}"
        return text

    def done(self) -> str:
        """Logs and returns the summary line: count, elapsed time and mean rate."""
        elapsed = max(self._clock() - self._start, 1e-9)
        summary = (f"{self.what}: {self.count} done in {format_seconds(elapsed)} "
                   f"({self.count / elapsed:.1f}/s)")
        self._log(summary)
        return summary


def format_seconds(seconds: float) -> str:
    """`M:SS`, or `H:MM:SS` from an hour."""
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
