"""The replay strip's arithmetic: its windows, the alert marks in one, a typed moment.

Plain Python (no Qt): the strip (console/views/replay/) draws and drives it.
"""

from __future__ import annotations

import bisect
import datetime as dt
import re
from collections.abc import Iterable

from console.fleet.alert_rows import AlertRow
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
UNIT_MS = {"s": 1000, "m": 60_000, "h": HOUR_MS, "d": 24 * HOUR_MS}
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
        parsed = dt.datetime.fromisoformat(cleaned)
    except ValueError:
        try:
            clock = dt.time.fromisoformat(cleaned)
        except ValueError:
            raise ValueError(f"{text!r} is not a moment: type {FORMS}") from None
        today = dt.datetime.fromtimestamp(now_ms / 1000).date()
        parsed = dt.datetime.combine(today, clock)
    at_ms = int(parsed.astimezone().timestamp() * 1000)  # no zone: local time
    if at_ms > now_ms:
        raise ValueError(f"{moment_text(at_ms)} is still to come: type {FORMS}")
    return at_ms
