"""ReservationLedger: GPUs held for a user or team until a time, durable in the journal."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from gpufleet.v1 import node_pb2 as pb
from node_daemon.control.records import Reservation
from node_daemon.control.wire import reservation_body, reservation_from_body, reservation_message
from node_daemon.errors import Invalid, NotFound, Refused
from node_daemon.journal.event_journal import EventJournal, StoredRecord

KIND = "reservation"
MAX_RESERVATION_S = 90 * 24 * 3600


class ReservationConflict(Refused):
    """Another holder has one of the GPUs; the message says who and until when."""


class BadReservation(Invalid):
    pass


class ReservationNotFound(NotFound):
    pass


def _clock_text(unix_ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(unix_ms / 1000))


def _gpu_list(gpus: Sequence[int]) -> str:
    return ", ".join(str(g) for g in gpus)


def _held_of(reservation: Reservation, gpus: Sequence[int]) -> tuple[int, ...]:
    """The GPUs of a release request (none: all of them), each one the reservation holds."""
    if not gpus:
        return reservation.gpu_indices
    foreign = sorted(set(gpus) - set(reservation.gpu_indices))
    if foreign:
        raise BadReservation(
            f"reservation {reservation.id} does not hold GPU {foreign[0]} "
            f"(it holds GPU {_gpu_list(reservation.gpu_indices)})"
        )
    return tuple(sorted(set(gpus)))


def describe(reservation: Reservation) -> str:
    gpus = _gpu_list(reservation.gpu_indices)
    until = _clock_text(reservation.until_unix_ms)
    text = f"GPU {gpus} reserved for {reservation.holder} until {until}"
    return text + (f" ({reservation.reason})" if reservation.reason else "")


class ReservationLedger:
    """Thread-safe; every change is journaled (record + event) before it takes effect."""

    def __init__(
        self,
        journal: EventJournal,
        gpu_count: Callable[[], int],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._journal, self._gpu_count, self._clock = journal, gpu_count, clock
        self._lock = threading.Lock()
        self._active: dict[str, Reservation] = {}
        for reservation in self._stored(active_only=True):
            self._active[reservation.id] = reservation
        self._next = 1 + max(
            (int(r.id.removeprefix("r-")) for r in self._stored(active_only=False)), default=0
        )

    def _stored(self, active_only: bool) -> list[Reservation]:
        return [reservation_from_body(b) for b in self._journal.records(KIND, active_only)]

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    # -- queries ---------------------------------------------------------------

    def active(self) -> list[Reservation]:
        with self._lock:
            return list(self._active.values())

    def holder_of(self, gpu: int) -> Reservation | None:
        with self._lock:
            return next((r for r in self._active.values() if gpu in r.gpu_indices), None)

    def get(self, reservation_id: str) -> Reservation:
        with self._lock:
            return self._found(reservation_id)

    def _found(self, reservation_id: str) -> Reservation:
        found = self._active.get(reservation_id)
        if found is None:
            raise ReservationNotFound(f"no active reservation {reservation_id} on this node")
        return found

    def all(self) -> list[Reservation]:
        return self._stored(active_only=False)

    # -- changes ---------------------------------------------------------------

    def reserve(
        self, gpus: Sequence[int], holder: str, until_unix_ms: int, reason: str, actor: str
    ) -> Reservation:
        now = self._now_ms()
        self._validate(gpus, holder, until_unix_ms, now)
        with self._lock:
            self._check_conflicts(gpus, holder)
            reservation = Reservation(
                id=f"r-{self._next}", gpu_indices=tuple(sorted(set(gpus))), holder=holder,
                until_unix_ms=until_unix_ms, reason=reason, created_by=actor,
                created_unix_ms=now, active=True,
            )  # fmt: skip
            self._write(pb.EVENT_KIND_RESERVATION_MADE, reservation, actor, describe(reservation))
            self._next += 1
            self._active[reservation.id] = reservation
            return reservation

    def _validate(self, gpus: Sequence[int], holder: str, until: int, now: int) -> None:
        count = self._gpu_count()
        if not gpus:
            raise BadReservation("name at least one GPU to reserve")
        unknown = sorted({g for g in gpus if not 0 <= g < count})
        if unknown:
            raise BadReservation(
                f"no GPU {unknown[0]} on this node (it has {count}: 0..{count - 1})"
            )
        if not holder.strip():
            raise BadReservation("a reservation needs a holder: a user name or team:NAME")
        if until <= now:
            raise BadReservation(f"until {_clock_text(until)} is in the past")
        if until - now > MAX_RESERVATION_S * 1000:
            raise BadReservation("a reservation may last at most 90 days")

    def _check_conflicts(self, gpus: Sequence[int], holder: str) -> None:
        for existing in self._active.values():
            overlap = sorted(set(gpus) & set(existing.gpu_indices))
            if overlap and existing.holder != holder:
                until = _clock_text(existing.until_unix_ms)
                why = f" ({existing.reason})" if existing.reason else ""
                raise ReservationConflict(
                    f"GPU {overlap[0]} is reserved for {existing.holder} until {until}{why}"
                )

    def release(self, reservation_id: str, actor: str, gpus: Sequence[int] = ()) -> Reservation:
        """End the reservation; given `gpus`, release only those: the others stay
        reserved under the same id. Returns the reservation as now stored."""
        with self._lock:
            reservation = self._found(reservation_id)
            released = _held_of(reservation, gpus)
            kept = tuple(g for g in reservation.gpu_indices if g not in released)
            if not kept:
                return self._end(
                    reservation, pb.EVENT_KIND_RESERVATION_RELEASED, actor, f"released by {actor}"
                )
            remaining = replace(reservation, gpu_indices=kept)
            # The same event kind as a whole release, with the reservation still active:
            # every console replaces its copy with this one (the GPUs it still holds).
            summary = f"GPU {_gpu_list(released)} released by {actor}; {describe(remaining)}"
            self._write(pb.EVENT_KIND_RESERVATION_RELEASED, remaining, actor, summary)
            self._active[reservation.id] = remaining
            return remaining

    def expire_due(self) -> list[Reservation]:
        """End reservations whose time is up (called once per tick)."""
        now = self._now_ms()
        with self._lock:
            due = [r for r in self._active.values() if r.until_unix_ms <= now]
            return [self._end(r, pb.EVENT_KIND_RESERVATION_EXPIRED, "", "expired") for r in due]

    def _end(self, reservation: Reservation, kind: int, actor: str, how: str) -> Reservation:
        ended = replace(reservation, active=False, ended_unix_ms=self._now_ms())
        self._write(kind, ended, actor, f"{describe(ended)}: {how}")
        del self._active[reservation.id]
        return ended

    def _write(self, kind: int, reservation: Reservation, actor: str, summary: str) -> None:
        event = pb.Event(time_unix_ms=self._now_ms(), kind=kind, summary=summary, actor=actor,  # type: ignore[arg-type]
                         reservation=reservation_message(reservation))  # fmt: skip
        record = StoredRecord(KIND, reservation.id, reservation.active, event.time_unix_ms,
                              reservation_body(reservation))  # fmt: skip
        self._journal.record([event], records=[record])
