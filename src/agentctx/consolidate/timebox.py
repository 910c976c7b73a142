"""The time box of one consolidation run: every step checks it between units of work.

A step that finds the box expired stops where it is and leaves the rest for the next run; it never
stops in the middle of a transaction, so nothing is half done.
"""

from __future__ import annotations

import time


class TimeBox:
    """A monotonic deadline ``seconds`` from now (``None``: no limit)."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self._start = time.monotonic()
        self._end = None if seconds is None else self._start + max(seconds, 0.0)

    def expired(self) -> bool:
        """True once the deadline has passed."""
        return self._end is not None and time.monotonic() >= self._end

    def remaining(self) -> float | None:
        """Seconds left (never negative), or None without a limit."""
        return None if self._end is None else max(self._end - time.monotonic(), 0.0)

    def elapsed(self) -> float:
        """Seconds since the box was opened."""
        return time.monotonic() - self._start
