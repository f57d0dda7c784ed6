"""Reservations and workloads as the console holds them: plain data, no Qt.

The daemon is the source of truth. The console mirrors each node's records
from a listing on every connect, then from the event stream (every reservation
or workload event carries the record as it is after the event) and from the
answers to its own requests. A record only moves forward — queued → running →
ended, active → ended — so a replayed event or a late answer never turns an
ended workload back into a running one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gpufleet.states import WorkloadState


@dataclass(frozen=True)
class ReservationRow:
    target: str  # the node's HOST:PORT
    id: str
    gpu_indices: tuple[int, ...]
    holder: str  # a user name, or "team:NAME"
    until_unix_ms: int
    reason: str
    created_by: str
    created_unix_ms: int
    ended_unix_ms: int | None
    active: bool

    @property
    def uid(self) -> tuple[str, str]:
        return self.target, self.id

    def in_force(self, now_unix_ms: int) -> bool:
        """Active and not yet past its end (the daemon expires it a moment later)."""
        return self.active and self.until_unix_ms > now_unix_ms

    def covers(self, gpu: int, now_unix_ms: int) -> bool:
        return gpu in self.gpu_indices and self.in_force(now_unix_ms)

    @property
    def rank(self) -> int:
        return 0 if self.active else 1


@dataclass(frozen=True)
class WorkloadRow:
    target: str
    id: str
    name: str
    argv: tuple[str, ...]
    owner: str
    gpu_count: int
    min_free_memory_bytes: int
    auto_place: bool
    state: WorkloadState
    gpu_indices: tuple[int, ...]
    pid: int | None
    pid_start_unix_ms: int | None
    queued_unix_ms: int
    started_unix_ms: int | None
    ended_unix_ms: int | None
    exit_code: int | None
    detail: str
    priority: int = 0
    time_limit_s: int = 0  # 0: none
    # Why it waits and what is held for it, as the node's placement says each tick.
    wait_reason: str = ""
    held_gpu_indices: tuple[int, ...] = ()
    idempotency_key: str = ""
    moved_from: str = ""  # "HOST/ID" when the fleet queue moved it here
    # Who submitted it, as its node authenticated them ("" unauthenticated, or unknown).
    submitted_by: str = ""

    @property
    def uid(self) -> tuple[str, str]:
        return self.target, self.id

    @property
    def label(self) -> str:
        """How a person names it: "w-3 (train)"."""
        return f"{self.id} ({self.name})" if self.name and self.name != self.id else self.id

    @property
    def since_unix_ms(self) -> int:
        """When it entered its current state."""
        if self.state.ended and self.ended_unix_ms is not None:
            return self.ended_unix_ms
        if self.state is WorkloadState.RUNNING and self.started_unix_ms is not None:
            return self.started_unix_ms
        return self.queued_unix_ms

    @property
    def rank(self) -> int:
        return self.state.rank


Record = ReservationRow | WorkloadRow


class ControlBook:
    """Every node's reservations and workloads."""

    def __init__(self) -> None:
        self._reservations: dict[tuple[str, str], ReservationRow] = {}
        self._workloads: dict[tuple[str, str], WorkloadRow] = {}
        self.version = 0  # bumped on every change, so views know when to refresh
        # Per GPU: active reservations and the running workload, rebuilt when the
        # version moves (tiles ask for every GPU on every repaint).
        self._index_version = -1
        self._reserved: dict[tuple[str, int], list[ReservationRow]] = {}
        self._running: dict[tuple[str, int], WorkloadRow] = {}

    # -- queries -------------------------------------------------------------

    def reservations(self, target: str | None = None) -> list[ReservationRow]:
        """Active reservations (of one node, or all)."""
        return [r for r in self._reservations.values() if r.active and target in (None, r.target)]

    def workloads(self, target: str | None = None) -> list[WorkloadRow]:
        return [w for w in self._workloads.values() if target in (None, w.target)]

    def workload(self, target: str, workload_id: str) -> WorkloadRow | None:
        return self._workloads.get((target, workload_id))

    def reservation_on(self, target: str, gpu: int, now_unix_ms: int) -> ReservationRow | None:
        """The reservation in force on a GPU, if any."""
        self._reindex()
        found = self._reserved.get((target, gpu), ())
        return next((r for r in found if r.in_force(now_unix_ms)), None)

    def running_on(self, target: str, gpu: int) -> WorkloadRow | None:
        """The workload running on a GPU, if any."""
        self._reindex()
        return self._running.get((target, gpu))

    def _reindex(self) -> None:
        if self._index_version == self.version:
            return
        self._reserved, self._running = {}, {}
        for r in self._reservations.values():
            if r.active:
                for gpu in r.gpu_indices:
                    self._reserved.setdefault((r.target, gpu), []).append(r)
        for w in self._workloads.values():
            if w.state is WorkloadState.RUNNING:
                self._running.update(((w.target, gpu), w) for gpu in w.gpu_indices)
        self._index_version = self.version

    # -- changes -------------------------------------------------------------

    def replace_node(
        self,
        target: str,
        reservations: Iterable[ReservationRow],
        workloads: Iterable[WorkloadRow],
    ) -> None:
        """A fresh listing from a node: it replaces what we held for that node."""
        for book in (self._reservations, self._workloads):
            for key in [k for k in book if k[0] == target]:
                del book[key]
        self._reservations.update((r.uid, r) for r in reservations)
        self._workloads.update((w.uid, w) for w in workloads)
        self.version += 1

    def apply(self, record: Record) -> bool:
        """Take a newer state of a record; False when it was older than, or the same as, ours."""
        if isinstance(record, ReservationRow):
            held: Record | None = self._reservations.get(record.uid)
            if held is not None and (held.rank > record.rank or held == record):
                return False  # an older state (a replay, or a late answer): keep the newer
            # Ended ones stay, as tombstones: a late "made" cannot bring them back.
            self._reservations[record.uid] = record
        else:
            held = self._workloads.get(record.uid)
            if held is not None and (held.rank > record.rank or held == record):
                return False  # the same again (a queue poll): views need not refresh
            self._workloads[record.uid] = record
        self.version += 1
        return True
