"""TimeWindow: which span of time the GPU plots show, live or paused.

Live, the plots follow the newest sample and show the last `span_s`; paused,
they hold a fixed [start, end] (chosen with Custom…, or left by a zoom or a
pan: `by_hand`, which the range bar says aloud) while samples keep arriving in
the ring. No Qt here: the plot view asks
`visible(now)` each frame and renders what it says.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class RangePreset:
    label: str  # the button's text, after "Last"
    span_s: float


PRESETS: Final = (
    RangePreset("5 min", 300.0),
    RangePreset("15 min", 900.0),
    RangePreset("1 h", 3600.0),
    RangePreset("6 h", 6 * 3600.0),
    RangePreset("24 h", 24 * 3600.0),
    RangePreset("7 d", 7 * 24 * 3600.0),
)
# 15 min: the widest preset the console's own ring (1,024 samples at 1 s) holds whole.
DEFAULT_SPAN_S: Final = 900.0
# The narrowest zoom: below half a minute the time axis would label fractions of a second.
MIN_SPAN_S: Final = 30.0
MAX_SPAN_S: Final = PRESETS[-1].span_s
# Incident replay: the plots hold the span around the moment shown, this much of it
# before (what led up to it) and the rest after.
BEFORE_MOMENT: Final = 0.8
# A moment that moves on within the range (a step, Play) moves the plots' line, not their
# range: the range turns a page once the moment passes TURN_AT of it, to put the moment at
# AFTER_TURN of the next (Play at 60x over 15 min: a turn every 11 s, not a redraw of every
# curve twice a second; bench/replay_fleet.py). Leaving it any other way (backwards, or
# more than a page on) centres the range as a jump does.
TURN_AT: Final = 0.95
AFTER_TURN: Final = 0.2


class TimeWindow:
    """The plots' time range: the last `span_s` while live, else a held [start, end]."""

    def __init__(self, span_s: float = DEFAULT_SPAN_S) -> None:
        self.span_s = span_s
        self.live = True
        self.held: tuple[float, float] | None = None  # what a paused view shows
        self.custom: tuple[float, float] | None = None  # the range Custom… chose
        self.by_hand = False  # held where a zoom or a pan left it (not Paused, not Custom…)
        self.moment_s: float | None = None  # the past moment the console shows (replay)
        # How the range was before the first moment, for `leave_moment`.
        self._before_moment: tuple[bool, tuple[float, float] | None, bool] | None = None

    def visible(self, now_s: float) -> tuple[float, float]:
        """(start, end) in epoch seconds to show when the newest time is `now_s`."""
        if self.live or self.held is None:
            return now_s - self.span_s, now_s
        return self.held

    def choose_span(self, span_s: float) -> None:
        """A preset: the last `span_s`, live (while a moment is shown: around it)."""
        self.span_s, self.custom = span_s, None
        if self.moment_s is not None:
            self.show_moment(self.moment_s, span_s)
        else:
            self.go_live()

    def show_moment(self, at_s: float, span_s: float | None = None) -> None:
        """Hold the range around a past moment the console shows (incident replay): the
        span shown until now (`span_s` if given), BEFORE_MOMENT of it before the moment.
        A moment moving on within the range held keeps it, or turns a page (TURN_AT).
        `leave_moment` puts the range back as it was before the first moment."""
        if self._before_moment is None:
            self._before_moment = (self.live, self.held, self.by_hand)
        if span_s is None:
            span_s = self.span_s if self.live or self.held is None else self.held[1] - self.held[0]
            page = self.held if self.moment_s is not None else None
            if page is not None and page[0] <= at_s <= page[0] + TURN_AT * span_s:
                self.moment_s = at_s  # within the page: only the moment's line moves
                return
            if page is not None and page[1] - span_s * (1 - TURN_AT) < at_s < page[1] + span_s:
                start = at_s - span_s * AFTER_TURN  # onwards past the page: the next page
                self.hold(start, start + span_s)
                self.moment_s = at_s
                return
        start = at_s - span_s * BEFORE_MOMENT
        self.hold(start, start + span_s)
        self.moment_s = at_s

    def leave_moment(self) -> None:
        """Back from the past (replay ended): the range as it was before its first moment."""
        if self._before_moment is not None:
            self.live, self.held, self.by_hand = self._before_moment
        self._before_moment, self.moment_s = None, None

    def choose_custom(self, start_s: float, end_s: float) -> None:
        """A fixed range from Custom…; ValueError unless it runs forwards and is finite."""
        if not (math.isfinite(start_s) and math.isfinite(end_s)) or end_s <= start_s:
            raise ValueError(f"a time range must end after it starts (from {start_s} to {end_s})")
        self.custom = (start_s, end_s)
        self.hold(start_s, end_s)

    def pause(self, now_s: float) -> None:
        """Freeze what is shown now; data keeps arriving behind it."""
        if self.live:
            self.hold(*self.visible(now_s))

    def hold(self, start_s: float, end_s: float) -> None:
        """Show [start, end] until Live or a preset."""
        self.live, self.held, self.by_hand = False, (start_s, end_s), False

    def move_by_hand(self, start_s: float, end_s: float) -> None:
        """A zoom or a pan: hold [start, end], and remember that a hand put it there."""
        self.hold(start_s, end_s)
        self.by_hand = True

    def go_live(self) -> None:
        self.live, self.held, self.by_hand = True, None, False

    def reset_zoom(self) -> None:
        """Back to the chosen range: the Custom… one if any, else the live preset."""
        if self.custom is not None:
            self.hold(*self.custom)
        else:
            self.go_live()


def ring_reach_s(capacity: int, first_s: float, last_s: float, count: int) -> float:
    """How far back the console's ring reaches when full, from its sampling interval so far."""
    if count < 2 or last_s <= first_s:
        return math.inf  # no interval seen yet: nothing to warn about
    return capacity * (last_s - first_s) / (count - 1)


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 120 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.0f} h"


def coverage_note(start_s: float, newest_s: float, reach_s: float) -> str | None:
    """What to say on the plot when the range starts before the console's ring can reach."""
    if not math.isfinite(reach_s) or newest_s - start_s <= reach_s * 1.01:
        return None
    return f"console holds the last {_duration(reach_s)}; longer ranges need the daemon's history"
