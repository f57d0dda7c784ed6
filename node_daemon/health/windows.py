"""Sliding windows over one GPU's readings, cheap enough for every tick.

A counter is kept by its changes only: an idle counter costs one entry however
long the window (a day of remapped rows at 1 Hz is a handful of entries, not
86,400), and a storm costs one entry per tick for the window's length.
"""

from __future__ import annotations

from collections import deque


class CounterWindow:
    """How much a monotonic counter grew within the last window."""

    def __init__(self) -> None:
        self._points: deque[tuple[int, int]] = deque()  # (ms, value) where the value changed

    def add(self, now_ms: int, value: int) -> bool:
        """Note the counter's value; True when it went down (it was reset: a GPU reset,
        a driver reload), and the window starts again from this value."""
        points = self._points
        if points and value < points[-1][1]:
            points.clear()
            points.append((now_ms, value))
            return True
        if not points or value != points[-1][1]:
            points.append((now_ms, value))
        return False

    def growth(self, now_ms: int, window_ms: int) -> int:
        """Growth since `window_ms` ago (since the first value seen, if that is later)."""
        points, cutoff = self._points, now_ms - window_ms
        # The newest point at or before the cutoff is the value at the cutoff.
        while len(points) >= 2 and points[1][0] <= cutoff:
            points.popleft()
        return points[-1][1] - points[0][1] if points else 0


class RiseWindow:
    """How much a value rose over a window during which a condition held throughout."""

    def __init__(self) -> None:
        self._points: deque[tuple[int, float]] = deque()

    def add(self, now_ms: int, value: float, holding: bool) -> None:
        if not holding:
            self._points.clear()
        else:
            self._points.append((now_ms, value))

    def rise(self, now_ms: int, window_ms: int) -> float | None:
        """The rise over the whole window; None until the condition has held that long."""
        points, cutoff = self._points, now_ms - window_ms
        while len(points) >= 2 and points[1][0] <= cutoff:
            points.popleft()
        if not points or points[0][0] > cutoff:
            return None
        return points[-1][1] - points[0][1]


class TickCounter:
    """How many marked ticks fell within the last window."""

    def __init__(self) -> None:
        self._marks: deque[int] = deque()

    def mark(self, now_ms: int) -> None:
        self._marks.append(now_ms)

    def count(self, now_ms: int, window_ms: int) -> int:
        marks, cutoff = self._marks, now_ms - window_ms
        while marks and marks[0] <= cutoff:
            marks.popleft()
        return len(marks)
