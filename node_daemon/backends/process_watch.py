"""What /proc says about the GPU processes, round after round (nvitop's columns).

A backend lists the processes on its GPUs every few ticks and asks `describe`
for each: the details of procinfo.describe_process (user, command, container,
Slurm job) are read once per process — a (pid, start time) pair, so a reused
pid is a new process — and kept while it stays on a GPU; its CPU use and
resident memory are read every round from two small files:

- CPU %: the growth of utime + stime (/proc/PID/stat) since the process was
  last measured, over the wall time between (100 = one core busy). The first
  round a process is seen has no interval yet: unset.
- host memory: resident pages (/proc/PID/statm, field 2) x the page size.

Only processes on GPUs are measured, two reads each, so the cost follows the
GPU process count, not the host's. A process measured again sooner than
`min_interval_s` (the same pid on two GPUs, a kill's fresh listing between
ticks) keeps its last CPU % rather than one from a too-short interval.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from node_daemon.backends import procinfo
from node_daemon.backends.readings import ProcessReading

MIN_INTERVAL_S = 0.2
_CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class CpuTimes:
    """Fields 22 (start time) and 14 + 15 (user + system CPU), in clock ticks."""

    start_ticks: int
    cpu_ticks: int


@dataclass
class _Seen:
    """One process as last measured."""

    start_ticks: int
    details: procinfo.ProcessDetails
    cpu_ticks: int
    at_s: float
    cpu_pct: float | None = None


class ProcessWatch:
    """Describes GPU processes; remembers each one until a round no longer lists it."""

    def __init__(
        self,
        proc_root: Path = procinfo.PROC,
        clock: Callable[[], float] = time.monotonic,
        min_interval_s: float = MIN_INTERVAL_S,
    ) -> None:
        self._proc_root, self._clock, self._min_interval_s = proc_root, clock, min_interval_s
        self._seen: dict[int, _Seen] = {}
        self._this_round: set[int] = set()

    def describe(self, pid: int, gpu_memory_bytes: int | None) -> ProcessReading:
        """`pid` as a reading: details, CPU % and resident memory (None where unknown)."""
        self._this_round.add(pid)
        seen = self._measure(pid)
        if seen is None:  # gone from /proc (or unreadable): only what NVML said
            return ProcessReading(pid=pid, gpu_memory_bytes=gpu_memory_bytes)
        d = seen.details
        return ProcessReading(
            pid=pid, gpu_memory_bytes=gpu_memory_bytes, start_time_unix_ms=d.start_time_unix_ms,
            user=d.user, command=d.command, container_id=d.container_id,
            slurm_job_id=d.slurm_job_id, cpu_pct=seen.cpu_pct,
            host_memory_bytes=resident_bytes(pid, self._proc_root),
        )  # fmt: skip

    def end_round(self) -> None:
        """Forget the processes this round did not describe (they left the GPUs)."""
        for pid in self._seen.keys() - self._this_round:
            del self._seen[pid]
        self._this_round = set()

    def _measure(self, pid: int) -> _Seen | None:
        times = cpu_times(pid, self._proc_root)
        if times is None:
            self._seen.pop(pid, None)
            return None
        now = self._clock()
        seen = self._seen.get(pid)
        if seen is None or seen.start_ticks != times.start_ticks:
            details = procinfo.describe_process(pid, self._proc_root)
            seen = _Seen(times.start_ticks, details, times.cpu_ticks, now)
            self._seen[pid] = seen
        elif now - seen.at_s >= self._min_interval_s:
            used_s = (times.cpu_ticks - seen.cpu_ticks) / _CLOCK_TICKS_PER_S
            seen.cpu_pct = max(0.0, 100.0 * used_s / (now - seen.at_s))
            seen.cpu_ticks, seen.at_s = times.cpu_ticks, now
        return seen


def cpu_times(pid: int, proc_root: Path = procinfo.PROC) -> CpuTimes | None:
    """Start time and CPU used so far, from /proc/PID/stat; None if it cannot be read."""
    stat = _read(proc_root / str(pid) / "stat")
    if stat is None or b")" not in stat:
        return None
    # The command name (field 2) may hold spaces and ")": split after the last ")".
    fields = stat[stat.rindex(b")") + 2 :].split()
    try:  # fields[0] is field 3 (state): utime 14, stime 15, starttime 22
        return CpuTimes(int(fields[19]), int(fields[11]) + int(fields[12]))
    except (IndexError, ValueError):
        return None


def resident_bytes(pid: int, proc_root: Path = procinfo.PROC) -> int | None:
    """Resident set size: field 2 of /proc/PID/statm (pages) x the page size."""
    statm = _read(proc_root / str(pid) / "statm")
    fields = (statm or b"").split()
    try:
        return int(fields[1]) * _PAGE_BYTES
    except (IndexError, ValueError):
        return None


def _read(path: Path) -> bytes | None:
    """One unbuffered read (these files are small); None if gone or unreadable."""
    try:
        with open(path, "rb", buffering=0) as f:
            return f.read(4096)
    except OSError:  # FileNotFoundError, ProcessLookupError, PermissionError, ...
        return None
