"""The replay strip's arithmetic: its windows, the marks in one, a step, a typed moment.

Plain Python (no Qt): the strip (console/views/replay/) draws and drives it.
"""

from __future__ import annotations

import bisect
import datetime as dt
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from console.fleet.alert_rows import AlertRow
from console.fleet.alerts import EventRow
from console.fleet.durations import UNIT_MS, duration_ms_text, iso_moment_ms, local_ms
from console.fleet.not_responding import RULE as NOT_RESPONDING
from gpufleet.v1.alert_severity import Severity

HOUR_MS = 3_600_000
# The strip's windows, each ending now: the last hour to the last 30 days (the history's
# coarsest tier keeps 30 days).
WINDOWS: dict[str, int] = {
    "1 h": HOUR_MS,
    "6 h": 6 * HOUR_MS,
    "24 h": 24 * HOUR_MS,
    "7 d": 7 * 24 * HOUR_MS,
    "30 d": 30 * 24 * HOUR_MS,
}
RELATIVE = re.compile(r"^-(\d+)\s*([smhd])$")
FORMS = "a time such as 03:12, 2026-12-07 03:12:00 (local time) or -90s, -30m, -2h, -1d"

# An alert's `started_unix_ms` is the sweep that raised it; its node journals the raise a
# moment later (when it writes the event), and a moment shows what the journal held then.
# A mark stands this much after the sweep: at it, the node's answer has the alert firing.
RAISE_SLACK_MS = 1000

Mark = tuple[int, Severity]  # where an alert's raise is shown (Unix ms) and its severity


def alert_marks(alerts: Iterable[AlertRow], start_ms: int, end_ms: int) -> list[Mark]:
    """Each alert raised within [start_ms, end_ms], oldest first (one per alert), at the
    moment that shows it raised (RAISE_SLACK_MS after its sweep)."""
    seen: dict[tuple[str, str], Mark] = {}
    for alert in alerts:
        if start_ms <= alert.started_unix_ms <= end_ms:
            seen[alert.uid] = (alert.started_unix_ms + RAISE_SLACK_MS, alert.severity)
    return sorted(seen.values())


# What an event's mark says it was, by the event's kind: node outages and what a person
# or self-healing did. An alert's own raise is an alert mark; its other changes are not
# marked (they crowd the raise). The console's own "not responding" alert marks an outage.
EVENT_MARKS: dict[str, str] = {
    "daemon_started": "daemon started",
    "gpu_lost": "GPU lost",
    "gpu_recovered": "GPU recovered",
    "alert_acknowledged": "acknowledged",
    "alert_silenced": "silenced",
    "silence_created": "silenced",
    "gpu_drained": "drained",
    "gpu_undrained": "returned to placement",
    "process_killed": "process killed",
    "healing_action": "self-healing",
}
OUTAGE, BACK = "node not responding", "node answering again"
# Each mark's kind, as the bar groups them (one colour and shape a group; the legend).
MARK_GROUPS: dict[str, str] = {
    OUTAGE: "outage", BACK: "outage", "daemon started": "outage",
    "GPU lost": "gpu", "GPU recovered": "gpu",
    "acknowledged": "person", "silenced": "person",
    "drained": "drain", "returned to placement": "drain",
    "process killed": "kill", "self-healing": "healing",
}  # fmt: skip


@dataclass(frozen=True, order=True)
class EventMark:
    """A node outage or an action on the timeline: when, what, and the line it says."""

    at_ms: int
    what: str  # EVENT_MARKS' words, OUTAGE or BACK
    text: str  # "gpu-hot GPU 1: acknowledged by alice — GPU 1 at 95 °C"

    @property
    def group(self) -> str:
        return MARK_GROUPS[self.what]


# The event kinds the timeline marks: EVENT_MARKS' and alert raises (the alert marks).
MARKED_KINDS: tuple[str, ...] = ("alert_raised", *EVENT_MARKS)


@dataclass(frozen=True)
class PastEvents:
    """A node's journal events of the marked kinds within the timeline's window, as
    ListEvents gave them: what happened there before the console connected."""

    target: str
    events: tuple[EventRow, ...]
    truncated: bool  # the node had more in the window: the oldest were left out


@dataclass(frozen=True)
class PastGaps:
    """Where a node's history has no samples within the timeline's window (a daemon
    that hung journals nothing: only the gap tells), as console.fleet.incident finds
    them: (the first sample missed, the first sample after), oldest first."""

    target: str
    spans: tuple[tuple[int, int], ...]


def gap_marks(gaps: PastGaps, name: str, start_ms: int, end_ms: int) -> list[EventMark]:
    """A gap's outage and its end as the console's own outage marks, within the window."""
    marks = []
    for silent, back in gaps.spans:
        lasted = duration_ms_text(back - silent)
        if start_ms <= silent <= end_ms:
            marks.append(EventMark(silent, OUTAGE, f"{name}: {OUTAGE} (no samples for {lasted})"))
        if start_ms <= back <= end_ms:
            marks.append(EventMark(back, BACK, f"{name}: {BACK} (after {lasted})"))
    return marks


def merged_events(*books: Iterable[EventRow]) -> list[EventRow]:
    """Events from several sources (the live stream's, the past's), each once."""
    return list({(e.target, e.seq): e for book in books for e in book}.values())


def _event_what(event: EventRow) -> str | None:
    if event.alert is not None and event.alert.rule == NOT_RESPONDING:
        return {"alert_raised": OUTAGE, "alert_cleared": BACK}.get(event.kind)
    return EVENT_MARKS.get(event.kind)


def event_marks(
    events: Iterable[EventRow], name_of: Callable[[str], str], start_ms: int, end_ms: int
) -> list[EventMark]:
    """The outages and actions among `events` within [start_ms, end_ms], oldest first."""
    marks = []
    for event in events:
        what = _event_what(event)
        if what is None or not start_ms <= event.time_unix_ms <= end_ms:
            continue
        where = name_of(event.target)
        if event.gpu_index is not None:
            where += f" GPU {event.gpu_index}"
        by = f" by {event.actor}" if event.actor else ""
        summary = f" — {event.summary}" if event.summary else ""
        marks.append(EventMark(event.time_unix_ms, what, f"{where}: {what}{by}{summary}"))
    return sorted(marks)


def marks_near(marks: list[EventMark], at_ms: int, within_ms: int) -> list[EventMark]:
    """The marks within `within_ms` of `at_ms` (what a pointer over the bar points at)."""
    return [m for m in marks if abs(m.at_ms - at_ms) <= within_ms]


# A step of the cursor: one sample of the tier the last answer came from (at least a
# second) while the window holds no more than this many of them; past it (a month of
# 1 min steps) a sample is too fine to cross the window by, and a step is the window's
# 1/COARSE_STEPS.
MAX_SAMPLE_STEPS = 10_000
COARSE_STEPS = 120  # 30 s of the last hour, 6 h of 30 days
MIN_STEP_MS = 1000


def cursor_step(window_ms: int, sample_step_ms: int | None) -> int:
    """One step of the cursor (ms) in a window, given the last answer's sample step."""
    if sample_step_ms:
        step = max(MIN_STEP_MS, sample_step_ms)
        if window_ms // step <= MAX_SAMPLE_STEPS:
            return step
    return max(MIN_STEP_MS, window_ms // COARSE_STEPS)


def previous_mark(marks: list[Mark], at_ms: int) -> int | None:
    """The last raise before `at_ms`, or None."""
    index = bisect.bisect_left(marks, (at_ms, Severity.INFO))
    return marks[index - 1][0] if index else None


def next_mark(marks: list[Mark], at_ms: int) -> int | None:
    """The first raise after `at_ms`, or None."""
    times = [t for t, _ in marks]
    index = bisect.bisect_right(times, at_ms)
    return times[index] if index < len(times) else None


def moment_text(at_ms: int) -> str:
    """'2026-12-07 03:12:00', local time."""
    return dt.datetime.fromtimestamp(at_ms / 1000).strftime("%Y-%m-%d %H:%M:%S")


def parse_moment(text: str, now_ms: int) -> int:
    """A typed moment as Unix ms: local ISO 8601 (a time alone: today), or relative to now.

    Raises:
        ValueError: not a moment, or one to come; its message names the forms.
    """
    cleaned = text.strip()
    relative = RELATIVE.match(cleaned)
    if relative:
        return now_ms - int(relative[1]) * UNIT_MS[relative[2]]
    try:
        at_ms = iso_moment_ms(cleaned)  # no zone: local time
    except ValueError:
        try:
            clock = dt.time.fromisoformat(cleaned)
        except ValueError:
            raise ValueError(f"{text!r} is not a moment: type {FORMS}") from None
        today = dt.datetime.fromtimestamp(now_ms / 1000).date()
        at_ms = local_ms(dt.datetime.combine(today, clock))
    if at_ms > now_ms:
        raise ValueError(f"{moment_text(at_ms)} is still to come: type {FORMS}")
    return at_ms
