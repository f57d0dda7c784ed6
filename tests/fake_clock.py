"""A clock in the test's hand: called as time.time or time.monotonic would be."""

from __future__ import annotations


class ManualClock:
    """Answers `now` (seconds) until the test moves it."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
