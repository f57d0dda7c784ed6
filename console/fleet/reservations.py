"""The fleet's reservations as the Reservations panel lists them, what a release means,
and the few seconds in which it can be undone. Plain Python, no Qt.

A release names exactly what it frees: the node, the GPUs, the holder. Releasing
some GPUs of a multi-GPU reservation frees only those (the daemon keeps the rest
under the same id). Undo re-reserves the freed GPUs for the same holder, reason
and end; it is offered for `UNDO_S` seconds after the daemon confirmed the release.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from console.fleet.control import ReservationRow
from console.fleet.durations import duration_text
from console.fleet.placement import clock_text, gpus_text

UNDO_S: Final = 8.0


@dataclass(frozen=True)
class ReservationLine:
    """One active reservation and the name of its node, as a row of the panel."""

    reservation: ReservationRow
    node: str

    def matches(self, text: str) -> bool:
        """Does the filter text appear in the node, GPUs, holder, reason or creator?"""
        needle = text.strip().casefold()
        r = self.reservation
        haystack = (self.node, gpus_text(r.gpu_indices), r.holder, r.reason, r.created_by)
        return not needle or any(needle in field.casefold() for field in haystack)


def reservation_lines(
    reservations: Iterable[ReservationRow], name_of: Callable[[str], str], now_unix_ms: int
) -> list[ReservationLine]:
    """Every reservation in force, soonest end first (what frees up next on top)."""
    lines = [ReservationLine(r, name_of(r.target)) for r in reservations if r.in_force(now_unix_ms)]
    return sorted(lines, key=lambda line: (line.reservation.until_unix_ms, line.node))


def until_text(reservation: ReservationRow, now_unix_ms: int) -> str:
    """ "18:00 (2 h 5 min left)"."""
    left = duration_text((reservation.until_unix_ms - now_unix_ms) / 1000)
    return f"{clock_text(reservation.until_unix_ms, now_unix_ms)} ({left} left)"


def holder_text(reservation: ReservationRow, now_unix_ms: int) -> str:
    """The GPU detail's line: 'team:ml · training run · until 18:00 (2 h 5 min left) · by alice'."""
    parts = [reservation.holder]
    if reservation.reason:
        parts.append(reservation.reason)
    parts.append(f"until {until_text(reservation, now_unix_ms)}")
    if reservation.created_by:
        parts.append(f"by {reservation.created_by}")
    return " · ".join(parts)


@dataclass(frozen=True)
class Release:
    """Some or all GPUs of one reservation, to be freed."""

    reservation: ReservationRow
    node: str  # the node's name
    gpus: tuple[int, ...]

    @property
    def whole(self) -> bool:
        return set(self.gpus) == set(self.reservation.gpu_indices)

    @property
    def kept(self) -> tuple[int, ...]:
        """The reservation's GPUs that stay reserved."""
        return tuple(g for g in self.reservation.gpu_indices if g not in self.gpus)

    @property
    def request_gpus(self) -> tuple[int, ...]:
        """What ReleaseReservationRequest.gpu_indices carries: empty for the whole."""
        return () if self.whole else self.gpus

    @property
    def what(self) -> str:
        """ "GPU 0 of node-a (team:ml)"."""
        return f"{gpus_text(self.gpus)} of {self.node} ({self.reservation.holder})"

    def question(self, now_unix_ms: int) -> str:
        """The confirmation's text: what is freed, whose, and what stays reserved."""
        r = self.reservation
        why = f", {r.reason}" if r.reason else ""
        text = (f"Release {gpus_text(self.gpus)} of {self.node}, reserved for {r.holder} "
                f"until {until_text(r, now_unix_ms)}{why}?")  # fmt: skip
        if self.kept:
            verb = "stays" if len(self.kept) == 1 else "stay"
            text += f"\n{gpus_text(self.kept)} of {self.node} {verb} reserved for {r.holder}."
        return text


def release_of(reservation: ReservationRow, node: str, gpus: Sequence[int] = ()) -> Release:
    """A release of `gpus` of the reservation (all of them when empty).

    Raises:
        ValueError: a GPU the reservation does not hold (it names them).
    """
    chosen = tuple(sorted(set(gpus))) or tuple(sorted(reservation.gpu_indices))
    foreign = [g for g in chosen if g not in reservation.gpu_indices]
    if foreign:
        raise ValueError(
            f"{gpus_text(foreign)} of {node} not in {reservation.holder}'s reservation "
            f"({gpus_text(reservation.gpu_indices)})"
        )
    return Release(reservation, node, chosen)


@dataclass(frozen=True)
class Restore:
    """What Undo asks for: the freed GPUs again, for the same holder, reason and end."""

    target: str
    gpus: tuple[int, ...]
    holder: str
    until_unix_ms: int
    reason: str


class UndoWindow:
    """The last confirmed release, undoable for `UNDO_S` seconds (clock: monotonic s)."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        wall_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self._clock, self._wall_ms = clock, wall_ms
        self._release: Release | None = None
        self._deadline = 0.0

    def opened(self, release: Release) -> None:
        """The daemon confirmed the release: Undo is offered from now."""
        self._release, self._deadline = release, self._clock() + UNDO_S

    def seconds_left(self) -> float:
        if self._release is None:
            return 0.0
        return max(0.0, self._deadline - self._clock())

    def pending(self) -> Release | None:
        """The release Undo would restore, or None once the window closed (or its end passed)."""
        if self._release is None or self.seconds_left() <= 0:
            return None
        if self._release.reservation.until_unix_ms <= self._wall_ms():
            return None  # it would have ended anyway: nothing to restore
        return self._release

    def take(self) -> Restore | None:
        """Close the window; what to reserve again, or None when too late."""
        release, self._release = self.pending(), None
        if release is None:
            return None
        r = release.reservation
        return Restore(r.target, release.gpus, r.holder, r.until_unix_ms, r.reason)

    def close(self) -> None:
        self._release = None
