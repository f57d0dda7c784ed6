"""How long, as a person says it: the one formatter for every time left, span and lead
time the console shows (reservations, silences, health lead times, the tiles); and the
one reading of a typed time (ISO 8601) and of a duration's units (90s, 30m, 2h, 1d).

Whole units, cut down, never rounded up: a reservation with 3 h 59 min 50 s left
reads "3 h 59 min", not "4 h" (nor "3h"). Plain Python, no Qt.
"""

from __future__ import annotations

import datetime as dt
from typing import Final

# A duration's or a relative moment's units, as typed: 90s, 30m, 2h, 1d (-2h: 2 h ago).
UNIT_MS: Final = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}

_WORDS: Final = {"s": " s", "min": " min", "h": " h", "d": " d"}
_COMPACT: Final = {"s": "s", "min": "m", "h": "h", "d": "d"}


def duration_text(seconds: float, *, compact: bool = False) -> str:
    """ "45 s", "12 min", "3 h 59 min", "2 d 4 h"; under two days in hours and minutes.

    `compact` (a tile's few pixels): "45s", "12m", "3h 59m", "2d 4h": the same
    figures, the units shortened.
    """
    unit = _COMPACT if compact else _WORDS
    whole = max(0, int(seconds))
    if whole < 60:
        return f"{whole}{unit['s']}"
    minutes = whole // 60
    if minutes < 60:
        return f"{minutes}{unit['min']}"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}{unit['h']} {minutes}{unit['min']}" if minutes else f"{hours}{unit['h']}"
    days, hours = divmod(hours, 24)
    return f"{days}{unit['d']} {hours}{unit['h']}" if hours else f"{days}{unit['d']}"


def duration_ms_text(ms: float) -> str:
    """`duration_text` of a span given in milliseconds (the wire's unit)."""
    return duration_text(ms / 1000)


def iso_moment_ms(text: str) -> int:
    """ISO 8601 (2026-12-01T18:00, or with a zone) as Unix ms; without a zone, local time.

    Raises:
        ValueError: not ISO 8601.
    """
    return local_ms(dt.datetime.fromisoformat(text.strip()))


def local_ms(moment: dt.datetime) -> int:
    """A date and time as Unix ms; without a zone, local time."""
    return int(moment.astimezone().timestamp() * 1000)
