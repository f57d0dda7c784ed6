"""UsageMeter: turns each sweep into GPU-seconds, memory, energy and reservation time.

Called once per sweep on the sampler thread. The time since the previous sweep
(dt) is billed with the state seen at this sweep, to the UTC day(s) it covers:
each process on a GPU gets an equal share of it, the holder of a reservation
gets the whole of it. Amounts collect in memory and go to the store every
`flush_interval_s` in one transaction, so a crash loses at most that much usage.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Callable, Mapping, Sequence

from gpufleet.v1.gpu_metrics import POWER_W, UTIL_GPU_PCT
from node_daemon.backends.readings import GpuHealth, GpuReading, ProcessReading
from node_daemon.usage.amounts import GIB, NodeAmounts, TeamsOf, UsageAmounts, utc_day
from node_daemon.usage.store import UsageStore, UsageStoreError

log = logging.getLogger(__name__)

ReservedFor = Callable[[int], str | None]

DEFAULT_FLUSH_INTERVAL_S = 5.0
# A gap longer than this many sample intervals (daemon paused, clock jumped,
# backend down) is billed as this many intervals, not as the whole gap.
MAX_GAP_INTERVALS = 3
# At or below this utilisation a reserved or allocated GPU counts as idle.
IDLE_UTIL_PCT = 5.0
UNKNOWN_USER = "(unknown)"


def process_share(
    reading: GpuReading, process: ProcessReading, dt_s: float, sharers: int
) -> UsageAmounts:
    """One process's part of dt on its GPU: an equal share of time, busy time and energy."""
    share_s = dt_s / sharers
    return UsageAmounts(
        gpu_seconds=share_s,
        busy_gpu_seconds=share_s * (reading[UTIL_GPU_PCT] or 0.0) / 100.0,
        memory_gib_seconds=(process.gpu_memory_bytes or 0) / GIB * dt_s,
        energy_joules=(reading[POWER_W] or 0.0) * share_s,
    )


def node_share(reading: GpuReading, dt_s: float, allocated: bool) -> NodeAmounts:
    """A GPU's part of the node totals; without a utilisation it is left out of the KPIs."""
    energy = (reading[POWER_W] or 0.0) * dt_s
    util = reading[UTIL_GPU_PCT]
    if util is None:
        return NodeAmounts(energy_joules=energy)
    allocated_s = dt_s if allocated else 0.0
    return NodeAmounts(
        gpu_seconds=dt_s,
        busy_gpu_seconds=dt_s * util / 100.0,
        allocated_seconds=allocated_s,
        allocated_idle_seconds=allocated_s if util <= IDLE_UTIL_PCT else 0.0,
        energy_joules=energy,
    )


def day_parts(end_s: float, dt_s: float) -> list[tuple[str, float]]:
    """The interval (end - dt, end] as (UTC day, seconds), split at midnight."""
    if dt_s <= 0:
        return []
    start_s, day = end_s - dt_s, utc_day(end_s)
    midnight_s = dt.datetime.fromisoformat(day).replace(tzinfo=dt.UTC).timestamp()
    if start_s >= midnight_s:
        return [(day, dt_s)]
    parts = [(utc_day(start_s), min(dt_s, midnight_s - start_s)), (day, end_s - midnight_s)]
    return [(d, seconds) for d, seconds in parts if seconds > 0]


class UsageMeter:
    """Thread-safe: `observe` runs on the sampler thread, `flush` from anywhere."""

    def __init__(
        self,
        store: UsageStore,
        sample_interval_s: float,
        teams_of: TeamsOf = lambda _user: (),
        flush_interval_s: float = DEFAULT_FLUSH_INTERVAL_S,
    ) -> None:
        self._store, self._teams_of = store, teams_of
        self._max_gap_s = MAX_GAP_INTERVALS * sample_interval_s
        self._flush_interval_s = flush_interval_s
        self._lock = threading.Lock()
        self._users: dict[tuple[str, str], UsageAmounts] = {}
        self._node: dict[str, NodeAmounts] = {}
        self._last_s: float | None = None
        self._flushed_s: float | None = None
        self._closed = False

    def observe(
        self,
        timestamp_s: float,
        readings: Sequence[GpuReading],
        processes: Mapping[int, Sequence[ProcessReading]],
        reserved_for: ReservedFor,
    ) -> None:
        """Bill the time since the previous sweep with the state of this one."""
        healthy = [r for r in readings if r.health is GpuHealth.OK]
        holders = {r.index: reserved_for(r.index) for r in healthy}
        with self._lock:
            if self._closed:
                return
            for day, dt_s in day_parts(timestamp_s, self._elapsed(timestamp_s)):
                for reading in healthy:
                    procs = processes.get(reading.index, ())
                    self._observe_gpu(day, dt_s, reading, procs, holders[reading.index])
            if self._flush_due(timestamp_s):
                self._flush_locked()

    def _elapsed(self, now_s: float) -> float:
        last_s, self._last_s = self._last_s, now_s
        if last_s is None or now_s <= last_s:
            return 0.0
        return min(now_s - last_s, self._max_gap_s)

    def _observe_gpu(
        self,
        day: str,
        dt_s: float,
        reading: GpuReading,
        procs: Sequence[ProcessReading],
        holder: str | None,
    ) -> None:
        for process in procs:
            self._add_user(
                day, process.user or UNKNOWN_USER, process_share(reading, process, dt_s, len(procs))
            )
        if holder is not None:
            idle_s = dt_s if self._reservation_idle(reading, procs, holder) else 0.0
            self._add_user(
                day, holder, UsageAmounts(reserved_seconds=dt_s, reserved_idle_seconds=idle_s)
            )
        share = node_share(reading, dt_s, allocated=bool(procs) or holder is not None)
        self._node[day] = self._node.get(day, NodeAmounts()) + share

    def _reservation_idle(
        self, reading: GpuReading, procs: Sequence[ProcessReading], holder: str
    ) -> bool:
        util = reading[UTIL_GPU_PCT]
        if util is not None and util <= IDLE_UTIL_PCT:
            return True
        return not any(self._holds(p.user, holder) for p in procs)

    def _holds(self, user: str | None, holder: str) -> bool:
        """Whether a process of `user` uses a reservation for `holder` (user or team:NAME)."""
        return user is not None and (user == holder or holder in self._teams_of(user))

    def _add_user(self, day: str, user: str, amounts: UsageAmounts) -> None:
        key = (day, user)
        self._users[key] = self._users.get(key, UsageAmounts()) + amounts

    def _flush_due(self, now_s: float) -> bool:
        if self._flushed_s is None:
            self._flushed_s = now_s
        if self._flushed_s <= now_s < self._flushed_s + self._flush_interval_s:
            return False
        self._flushed_s = now_s
        return True

    def flush(self) -> None:
        """Write what has been collected since the last flush (thread-safe)."""
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        if not self._users and not self._node:
            return
        try:
            self._store.add(self._users, self._node)
        except UsageStoreError as exc:
            # Keep the amounts: the next flush tries again with them added up.
            log.error("usage not saved yet, will retry: %s", exc)
            return
        self._users, self._node = {}, {}

    def close(self) -> None:
        """Flush and stop observing. Idempotent; the store stays open (the caller owns it)."""
        with self._lock:
            if not self._closed:
                self._flush_locked()
                self._closed = True
