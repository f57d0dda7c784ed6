"""Times left and spans read as a person says them, in every place the console shows
one (issue #33: a reservation with 3 h 59 min left showed "3h")."""

from __future__ import annotations

import pytest

from console.fleet.control import ReservationRow
from console.fleet.durations import duration_ms_text, duration_text
from console.fleet.identity import expiry_text
from console.fleet.reservations import holder_text, until_text

MIN, HOUR, DAY = 60, 3600, 86400
NOW_MS = 1_700_000_000_000


@pytest.mark.parametrize(
    ("seconds", "words", "compact"),
    [
        (0, "0 s", "0s"),
        (45, "45 s", "45s"),
        (12 * MIN + 59, "12 min", "12m"),
        (HOUR, "1 h", "1h"),
        (2 * HOUR + 5 * MIN, "2 h 5 min", "2h 5m"),
        (3 * HOUR + 59 * MIN, "3 h 59 min", "3h 59m"),
        (3 * HOUR + 59 * MIN + 59, "3 h 59 min", "3h 59m"),  # cut down, never rounded up
        (30 * HOUR + 20 * MIN, "30 h 20 min", "30h 20m"),
        (2 * DAY + 4 * HOUR + 30 * MIN, "2 d 4 h", "2d 4h"),
        (3 * DAY, "3 d", "3d"),
        (-5, "0 s", "0s"),  # already over
    ],
)
def test_a_duration_reads_as_a_person_says_it(seconds: int, words: str, compact: str) -> None:
    assert duration_text(seconds) == words
    assert duration_text(seconds, compact=True) == compact
    assert duration_ms_text(seconds * 1000) == words


def reservation(left_s: int) -> ReservationRow:
    return ReservationRow(
        target="h:1", id="r-1", gpu_indices=(0,), holder="team:ml", reason="training run",
        created_by="alice", created_unix_ms=NOW_MS - HOUR * 1000,
        until_unix_ms=NOW_MS + left_s * 1000, ended_unix_ms=None, active=True,
    )  # fmt: skip


def test_every_time_left_keeps_its_minutes() -> None:
    left = 3 * HOUR + 59 * MIN + 30
    assert until_text(reservation(left), NOW_MS).endswith("(3 h 59 min left)")
    assert "(3 h 59 min left) · by alice" in holder_text(reservation(left), NOW_MS)
    assert expiry_text(NOW_MS + left * 1000, NOW_MS) == "expires in 3 h 59 min"
    assert expiry_text(NOW_MS + (6 * HOUR + 10 * MIN) * 1000, NOW_MS) == "expires in 6 h 10 min"
