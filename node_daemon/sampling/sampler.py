"""The sampler: one named thread that sweeps every GPU once per tick.

It owns the backend (backends need not be thread-safe), turns each sweep into
one serialized SampleBatch in the shared history, and keeps the backend's
health: a backend that fails to open is retried with backoff while the daemon
keeps serving. Between ticks it looks at the GPUs near an alert line (adaptive
sampling, `Pace`) and sweeps at once when a look finds one across a line.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from node_daemon.backends.base import BackendUnavailable, GpuBackend, TemperaturePeek
from node_daemon.backends.facts import MissingFacts, facts_missing
from node_daemon.backends.readings import GpuReading, NodeFacts, ProcessReading
from node_daemon.health.model import GpuCondition
from node_daemon.sampling.pace import Pace, Watched
from node_daemon.sampling.sample_ring import RingEntry, SampleRing
from node_daemon.sampling.wire import batch_message

log = logging.getLogger(__name__)

RETRY_FIRST_S = 1.0
RETRY_MAX_S = 30.0


@dataclass(frozen=True)
class LatestSweep:
    """The newest sweep, for readers outside the sampler thread (metrics)."""

    timestamp_unix_ms: int
    readings: tuple[GpuReading, ...]
    processes: Mapping[int, Sequence[ProcessReading]]
    # The last Xid each GPU reported since the daemon started (dcgm's XID_ERRORS).
    last_xids: Mapping[int, int]
    # Each GPU's health as judged at this sweep (empty without a judge).
    conditions: Mapping[int, GpuCondition] = field(default_factory=dict)


@dataclass
class _ProcessRequest:
    """One caller waiting for a process list read on the sampler thread."""

    done: threading.Event = field(default_factory=threading.Event)
    processes: Mapping[int, Sequence[ProcessReading]] = field(default_factory=dict)
    error: str | None = None


@dataclass(frozen=True)
class BackendStatus:
    """What the sampler knows about its backend right now."""

    ok: bool
    detail: str = ""
    facts: NodeFacts | None = None


StatusListener = Callable[[BackendStatus], None]
# Called on the sampler thread after every sweep with the readings and the
# latest process lists; while the backend is down, with nothing, once per retry.
SweepListener = Callable[[Sequence[GpuReading], Mapping[int, Sequence[ProcessReading]]], None]
# Judges each GPU's health from a sweep, on the sampler thread, before the batch is
# built, so each sample carries the condition of its own tick: (readings, processes,
# the sweep's time in ms) → condition by GPU index.
HealthJudge = Callable[
    [Sequence[GpuReading], Mapping[int, Sequence[ProcessReading]], int],
    Mapping[int, GpuCondition],
]


class Sampler:
    """Samples `backend` every `interval_s` into `history` on thread 'gpufleet-sampler'."""

    def __init__(
        self,
        backend: GpuBackend,
        history: SampleRing,
        interval_s: float = 1.0,
        process_interval_s: float = 3.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._backend, self._history = backend, history
        self._interval_s = interval_s
        self._process_every = max(1, round(process_interval_s / interval_s))
        self._clock = clock
        self._stop = threading.Event()
        # Set by stop() and by a fresh-process request: either ends the wait between ticks.
        self._wakeup = threading.Event()
        self._process_requests: list[_ProcessRequest] = []
        self._requests_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="gpufleet-sampler", daemon=True)
        self._status = BackendStatus(ok=False, detail="starting")
        self._listeners: list[StatusListener] = []
        self._sweep_listeners: list[SweepListener] = []
        self._health_judge: HealthJudge | None = None
        self._tick = 0
        self._processes: Mapping[int, Sequence[ProcessReading]] = {}
        # Replaced (never mutated) once per sweep: readers need no lock.
        self.latest: LatestSweep | None = None
        self._last_xids: dict[int, int] = {}
        self.sweeps = 0
        self.last_sweep_s = 0.0
        self._retry_s = RETRY_FIRST_S
        self._missing_facts = MissingFacts()
        # Adaptive sampling: the GPUs to look at until the next tick, from the last sweep.
        self._pace: Pace | None = None
        self._watched: list[Watched] = []
        self._previous: tuple[float, dict[int, GpuReading]] = (0.0, {})  # monotonic, by index
        self.looks = 0  # looks at GPUs near a line between ticks
        self.early_sweeps = 0  # sweeps a look asked for before their tick
        self._look_failures = 0

    @property
    def status(self) -> BackendStatus:
        return self._status

    @property
    def interval_s(self) -> float:
        return self._interval_s

    def add_status_listener(self, listener: StatusListener) -> None:
        self._listeners.append(listener)

    def set_health_judge(self, judge: HealthJudge) -> None:
        self._health_judge = judge

    def set_pace(self, pace: Pace) -> None:
        """Look at GPUs near an alert line between ticks, where the backend can
        (TemperaturePeek); without a pace, or with such a backend, ticks only."""
        if isinstance(self._backend, TemperaturePeek):
            self._pace = pace

    def add_sweep_listener(self, listener: SweepListener) -> None:
        self._sweep_listeners.append(listener)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        self._wakeup.set()
        self._thread.join(timeout_s)
        self._backend.close()

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            if not self._status.ok and not self._try_open():
                self._notify_sweep([], {})  # node-level rules still run (backend degraded)
                self._pause(self._retry_s)
                self._retry_s = min(RETRY_MAX_S, self._retry_s * 2)
                next_at = time.monotonic()
                continue
            self._sweep_safely()
            next_at += self._interval_s
            # A sweep that overran skips ticks instead of bunching them up.
            next_at = self._wait_for_tick(max(next_at, time.monotonic()))

    def _wait_for_tick(self, next_at: float) -> float:
        """Wait for the tick at `next_at`, serving process requests, and looking at the
        GPUs near a line meanwhile; returns when the next sweep is due: `next_at`, or now
        if a look found a GPU across a line (the ticks then go on from now)."""
        watched, fast_s = self._watched, self._pace.settings.fast_interval_s if self._pace else 0
        look_at = time.monotonic() + fast_s if watched else math.inf
        while not self._stop.is_set():
            now = time.monotonic()
            if now >= next_at:
                return next_at
            if now >= look_at:
                if self._look(watched):
                    self.early_sweeps += 1
                    return now
                look_at = time.monotonic() + fast_s
            if self._pause(min(next_at, look_at) - now):
                self._serve_process_requests()
        return next_at

    def _look(self, watched: list[Watched]) -> bool:
        """One look at the watched GPUs' temperatures: whether one crossed a line."""
        assert isinstance(self._backend, TemperaturePeek)
        try:
            peeked = self._backend.peek_temperatures([w.index for w in watched])
        except Exception as exc:  # the next sweep reads the backend and says what is wrong
            self._look_failures += 1
            if self._look_failures == 1:
                log.warning("looking at GPUs near an alert line failed: %s", exc)
            return False
        self.looks += 1
        return any(w.crossed(peeked[w.index]) for w in watched if w.index in peeked)

    def _pause(self, timeout_s: float) -> bool:
        """Wait until the next tick; True if woken early (a request, or stop)."""
        woken = self._wakeup.wait(max(0.0, timeout_s))
        self._wakeup.clear()
        return woken

    def fresh_processes(self, timeout_s: float = 5.0) -> Mapping[int, Sequence[ProcessReading]]:
        """Processes per GPU as the backend lists them *after* this call began.

        For decisions that must not rest on a snapshot seconds old (a kill: the
        pid may have been reused meanwhile). Read on the sampler thread, which
        owns the backend; raises BackendUnavailable when it cannot be read.
        """
        if not self._status.ok:
            raise BackendUnavailable(f"the GPU backend is unavailable: {self._status.detail}")
        request = _ProcessRequest()
        with self._requests_lock:
            self._process_requests.append(request)
        self._wakeup.set()
        if not request.done.wait(timeout_s):
            raise BackendUnavailable(f"the GPU process list could not be read in {timeout_s:.0f} s")
        if request.error is not None:
            raise BackendUnavailable(request.error)
        return request.processes

    def _serve_process_requests(self) -> None:
        with self._requests_lock:
            requests, self._process_requests = self._process_requests, []
        if not requests:
            return
        try:
            processes: Mapping[int, Sequence[ProcessReading]] = self._backend.read_processes()
            error = None
        except Exception as exc:  # the waiting caller is told; sampling goes on
            processes, error = {}, f"the GPU process list could not be read: {exc}"
        for request in requests:
            request.processes, request.error = processes, error
            request.done.set()

    def _try_open(self) -> bool:
        try:
            facts = self._backend.open()
        except BackendUnavailable as exc:
            self._set_status(BackendStatus(ok=False, detail=str(exc)))
            log.error("GPU backend unavailable, retrying in %.0f s: %s", self._retry_s, exc)
            return False
        self._retry_s = RETRY_FIRST_S
        self._set_status(BackendStatus(ok=True, facts=facts))
        log.info("GPU backend %s ready: %d GPUs", self._backend.kind.value, len(facts.gpus))
        return True

    def _sweep_safely(self) -> None:
        try:
            self.sweep()
        except BackendUnavailable as exc:
            self.latest = None  # no readings: the metrics say so by their absence
            self._set_status(BackendStatus(ok=False, detail=str(exc)))
            log.error("GPU backend lost: %s", exc)
        except Exception:
            # A bug in one sweep must not stop sampling for good.
            log.exception("sampling sweep failed")

    def sweep(self) -> RingEntry:
        """Read every GPU once and append the batch to the history."""
        started = time.perf_counter()
        readings = self._backend.read_gpus()
        self._read_missing_facts(readings)
        self._tick += 1
        if self._tick % self._process_every == 1 or self._process_every == 1:
            self._processes = self._backend.read_processes()
        timestamp_ms = int(self._clock() * 1000)
        conditions = self._judge(readings, timestamp_ms)
        batch = batch_message(timestamp_ms, self._tick, readings, self._processes, conditions)
        entry = RingEntry(timestamp_ms, self._tick, batch.SerializeToString())
        self._history.append(entry)
        self._last_xids.update((r.index, r.xids[-1]) for r in readings if r.xids)
        self.latest = LatestSweep(
            timestamp_ms, tuple(readings), self._processes, dict(self._last_xids), conditions
        )
        self.sweeps += 1
        self.last_sweep_s = time.perf_counter() - started
        self._watch(readings)
        self._notify_sweep(readings, self._processes)
        return entry

    def _watch(self, readings: Sequence[GpuReading]) -> None:
        """The GPUs to look at until the next tick (none without a pace)."""
        now, (before, previous) = time.monotonic(), self._previous
        self._previous = (now, {r.index: r for r in readings})
        if self._pace is None:
            return
        try:
            self._watched = self._pace.watch(readings, previous, now - before)
        except Exception:
            self._watched = []
            log.exception("choosing the GPUs near an alert line failed")

    def _judge(self, readings: Sequence[GpuReading], now_ms: int) -> Mapping[int, GpuCondition]:
        """Each GPU's condition; a failing judge leaves the samples without one."""
        if self._health_judge is None:
            return {}
        try:
            return self._health_judge(readings, self._processes, now_ms)
        except Exception:
            log.exception("judging GPU health failed")
            return {}

    def _read_missing_facts(self, readings: Sequence[GpuReading]) -> None:
        """Re-read the facts of GPUs that were lost at open() and answer now."""
        facts = self._status.facts
        due = self._missing_facts.due(facts, readings) if facts is not None else []
        if not due:
            return
        fresh = self._backend.open()  # idempotent: reads the facts again
        for index in due:
            gpu = next((g for g in fresh.gpus if g.index == index), None)
            if gpu is None or facts_missing(gpu):
                log.warning("GPU %d answers, but its facts are still unreadable", index)
            else:
                log.info("GPU %d: facts read now that it answers: %s %s", index, gpu.name, gpu.uuid)
        self._set_status(BackendStatus(ok=True, facts=fresh))

    def _notify_sweep(
        self, readings: Sequence[GpuReading], processes: Mapping[int, Sequence[ProcessReading]]
    ) -> None:
        for listener in self._sweep_listeners:
            try:
                listener(readings, processes)
            except Exception:
                # A failing rule must not stop sampling.
                log.exception("sweep listener failed")

    def _set_status(self, status: BackendStatus) -> None:
        changed = (status.ok, status.detail, status.facts) != (
            self._status.ok, self._status.detail, self._status.facts,
        )  # fmt: skip
        self._status = status
        if changed:
            for listener in self._listeners:
                listener(status)
