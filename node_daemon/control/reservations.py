"""ReservationLedger: GPUs held for a user or team until a time, durable in the journal."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence

from gpufleet.v1 import node_pb2 as pb
from node_daemon.journal.event_journal import EventJournal, StoredRecord

KIND = "reservation"
MAX_RESERVATION_S = 90 * 24 * 3600


class ReservationConflict(Exception):
    """Another holder has one of the GPUs; the message says who and until when."""


class BadReservation(ValueError):
    pass


def _clock_text(unix_ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(unix_ms / 1000))


def describe(reservation: pb.Reservation) -> str:
    gpus = ", ".join(str(g) for g in reservation.gpu_indices)
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
        self._active: dict[str, pb.Reservation] = {}
        for body in journal.records(KIND, active_only=True):
            reservation = pb.Reservation.FromString(body)
            self._active[reservation.id] = reservation
        self._next = 1 + max((int(r.id.removeprefix("r-")) for r in self._all_ids()), default=0)

    def _all_ids(self) -> Iterable[pb.Reservation]:
        return (
            pb.Reservation.FromString(b) for b in self._journal.records(KIND, active_only=False)
        )

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    # -- queries ---------------------------------------------------------------

    def active(self) -> list[pb.Reservation]:
        with self._lock:
            return [self._copy(r) for r in self._active.values()]

    def holder_of(self, gpu: int) -> pb.Reservation | None:
        with self._lock:
            return next(
                (self._copy(r) for r in self._active.values() if gpu in r.gpu_indices), None
            )

    def get(self, reservation_id: str) -> pb.Reservation:
        with self._lock:
            found = self._active.get(reservation_id)
            if found is None:
                raise KeyError(f"no active reservation {reservation_id} on this node")
            return self._copy(found)

    def all(self) -> list[pb.Reservation]:
        return [
            pb.Reservation.FromString(b) for b in self._journal.records(KIND, active_only=False)
        ]

    @staticmethod
    def _copy(reservation: pb.Reservation) -> pb.Reservation:
        copy = pb.Reservation()
        copy.CopyFrom(reservation)
        return copy

    # -- changes ---------------------------------------------------------------

    def reserve(
        self, gpus: Sequence[int], holder: str, until_unix_ms: int, reason: str, actor: str
    ) -> pb.Reservation:
        now = self._now_ms()
        self._validate(gpus, holder, until_unix_ms, now)
        with self._lock:
            self._check_conflicts(gpus, holder)
            reservation = pb.Reservation(
                id=f"r-{self._next}", gpu_indices=sorted(set(gpus)), holder=holder,
                until_unix_ms=until_unix_ms, reason=reason, created_by=actor,
                created_unix_ms=now, active=True,
            )  # fmt: skip
            self._write(pb.EVENT_KIND_RESERVATION_MADE, reservation, actor, describe(reservation))
            self._next += 1
            self._active[reservation.id] = reservation
            return self._copy(reservation)

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

    def release(self, reservation_id: str, actor: str) -> pb.Reservation:
        with self._lock:
            reservation = self._active.get(reservation_id)
            if reservation is None:
                raise KeyError(f"no active reservation {reservation_id} on this node")
            self._end(
                reservation, pb.EVENT_KIND_RESERVATION_RELEASED, actor, f"released by {actor}"
            )
            return self._copy(reservation)

    def expire_due(self) -> list[pb.Reservation]:
        """End reservations whose time is up (called once per tick)."""
        now, expired = self._now_ms(), []
        with self._lock:
            for reservation in [r for r in self._active.values() if r.until_unix_ms <= now]:
                self._end(reservation, pb.EVENT_KIND_RESERVATION_EXPIRED, "", "expired")
                expired.append(self._copy(reservation))
        return expired

    def _end(self, reservation: pb.Reservation, kind: int, actor: str, how: str) -> None:
        ended = self._copy(reservation)
        ended.active, ended.ended_unix_ms = False, self._now_ms()
        self._write(kind, ended, actor, f"{describe(ended)}: {how}")
        del self._active[reservation.id]
        reservation.CopyFrom(ended)

    def _write(self, kind: int, reservation: pb.Reservation, actor: str, summary: str) -> None:
        event = pb.Event(time_unix_ms=self._now_ms(), kind=kind, summary=summary, actor=actor)  # type: ignore[arg-type]
        event.reservation.CopyFrom(reservation)
        record = StoredRecord(KIND, reservation.id, reservation.active, event.time_unix_ms,
                              reservation.SerializeToString())  # fmt: skip
        self._journal.record([event], records=[record])
