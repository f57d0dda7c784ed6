"""Replay's Play: the cursor moving through the past at a speed, pausing on a new critical.

Plain Python (no Qt): the strip's player (console/views/replay/player.py) calls
`advance` on each frame and `judge` on each node's answer. Time comes in as
arguments (a monotonic clock's ms for the pace, the wall clock's for the present), so
a test plays an hour in a few frames without waiting for it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from console.fleet.alert_rows import AlertRow
from gpufleet.v1.alert_severity import Severity

# The speeds offered: the past in real time up to ten minutes a second (an hour in 6 s).
SPEEDS: dict[str, int] = {"1x": 1, "10x": 10, "60x": 60, "600x": 600}
DEFAULT_SPEED = "60x"


@dataclass(frozen=True)
class Step:
    """Where a frame takes the cursor: a moment, or the present (back to live)."""

    at_ms: int
    live: bool


def criticals(alerts: Iterable[AlertRow]) -> dict[tuple[str, str], AlertRow]:
    """The critical alerts firing among `alerts`, by uid."""
    return {a.uid: a for a in alerts if a.firing and a.severity is Severity.CRITICAL}


class Playback:
    """Whether the cursor plays, how fast, and which criticals it has already shown."""

    def __init__(self) -> None:
        self.speed = SPEEDS[DEFAULT_SPEED]
        self.playing = False
        self._last_frame_ms = 0.0  # the monotonic clock at the previous frame
        self._seen: set[tuple[str, str]] = set()  # criticals firing in the last moment shown

    def play(self, clock_ms: float, firing: Iterable[AlertRow]) -> None:
        """Start from the moment shown: what fires in it already is no news."""
        self.playing = True
        self._last_frame_ms = clock_ms
        self._seen = set(criticals(firing))

    def pause(self) -> None:
        self.playing = False

    def advance(self, at_ms: int, clock_ms: float, now_ms: int) -> Step:
        """The cursor's next place from `at_ms`: as much past as `speed` times the real
        time since the last frame; the present (live) once it gets there."""
        elapsed = max(0.0, clock_ms - self._last_frame_ms)
        self._last_frame_ms = clock_ms
        moved = at_ms + round(elapsed * self.speed)
        if moved >= now_ms:
            self.playing = False
            return Step(now_ms, live=True)
        return Step(moved, live=False)

    def judge(self, firing: Iterable[AlertRow]) -> list[AlertRow]:
        """The criticals firing in the moment just shown that the previous one did not
        have (oldest raise first); the player pauses on any."""
        now = criticals(firing)
        new = [a for uid, a in now.items() if uid not in self._seen]
        self._seen = set(now)
        return sorted(new, key=lambda a: a.started_unix_ms)
