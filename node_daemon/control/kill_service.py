"""ProcessKiller: who may be killed (a process listed on that GPU now), and the record of it.

The target is looked up in a process list read *after* the request arrived,
never in the last sample: a pid listed seconds ago may since have exited and
been reused by another user's process on no GPU at all. The request's start
time must be the listed process's, and the caller is authorised against the
listed owner, before anything is signalled.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Protocol

from gpufleet.policy import job_process_protected
from gpufleet.v1 import node_pb2 as pb
from node_daemon.backends.base import BackendUnavailable
from node_daemon.backends.readings import ProcessReading
from node_daemon.control.kill import (
    START_TOLERANCE_MS,
    KillOutcome,
    PidReused,
    clock_text,
    kill_process,
)
from node_daemon.errors import Refused
from node_daemon.journal.event_journal import EventJournal
from node_daemon.sampling.sampler import Sampler

log = logging.getLogger(__name__)

MAX_GRACE_S = 300
DEFAULT_GRACE_S = 10


class KillRefused(Refused):
    """The target is not one the daemon may kill; the message says why."""


class SimulatedProcesses(Protocol):
    def remove_simulated_process(self, gpu: int, pid: int) -> bool: ...


UnkillableReport = Callable[[int, int, str], None]
# Raises node_daemon.errors.Forbidden when the caller may not kill this (freshly listed) process.
Authorise = Callable[[ProcessReading], None]


class ProcessKiller:
    def __init__(
        self,
        sampler: Sampler,
        journal: EventJournal,
        report_unkillable: UnkillableReport,
        allow_job_processes: bool = False,
        simulated: SimulatedProcesses | None = None,
    ) -> None:
        self._sampler, self._journal = sampler, journal
        self._report_unkillable, self._allow_jobs = report_unkillable, allow_job_processes
        self._simulated = simulated

    def set_allow_job_processes(self, allow: bool) -> None:
        """The kill policy after a config reload; read at every kill."""
        self._allow_jobs = allow

    def kill(
        self,
        gpu: int,
        pid: int,
        start_time_unix_ms: int,
        grace_s: int,
        actor: str,
        authorise: Authorise = lambda _process: None,
    ) -> tuple[KillOutcome, str]:
        """Kill `pid` on `gpu` if it is listed there now with that start time and may be killed."""
        process = self.target(gpu, pid, start_time_unix_ms)
        # Who asks first, then what the node's policy protects (gpufleet.policy): a
        # non-owner hears that the process is not theirs, as the console tells them.
        authorise(process)
        self.refuse_job_process(process)
        grace = DEFAULT_GRACE_S if grace_s == 0 else min(grace_s, MAX_GRACE_S)
        if self._simulated is not None and self._simulated.remove_simulated_process(gpu, pid):
            outcome = KillOutcome.TERMINATED  # one of the simulator's own processes
        else:
            try:
                # The pidfd pins the process; its start time is checked once more after that.
                outcome = kill_process(pid, start_time_unix_ms, grace)
            except PidReused as exc:
                raise KillRefused(str(exc)) from exc
        detail = self._describe(gpu, process, outcome, actor)
        self._record(gpu, detail, actor)
        if outcome is KillOutcome.UNKILLABLE:
            self._report_unkillable(gpu, pid, detail)
        return outcome, detail

    def target(self, gpu: int, pid: int, start_time_unix_ms: int) -> ProcessReading:
        """The process as listed on the GPU now, with that start time; else KillRefused."""
        if pid <= 1:
            raise KillRefused(f"pid {pid} is never a GPU process; nothing was signalled")
        if start_time_unix_ms <= 0:
            raise KillRefused(
                f"name pid {pid} with its start_time_unix_ms as listed on the GPU "
                "(a pid alone may have been reused); nothing was signalled"
            )
        try:
            listed = list(self._sampler.fresh_processes().get(gpu, ()))
        except BackendUnavailable as exc:
            raise KillRefused(f"{exc}; nothing was signalled") from exc
        process = next((p for p in listed if p.pid == pid), None)
        if process is None:
            shown = ", ".join(str(p.pid) for p in listed) or "none"
            raise KillRefused(f"pid {pid} is not on GPU {gpu} (processes there now: {shown})")
        listed_start = process.start_time_unix_ms
        if listed_start is None or abs(listed_start - start_time_unix_ms) > START_TOLERANCE_MS:
            raise KillRefused(
                f"pid {pid} on GPU {gpu} started at {clock_text(listed_start)}, not at "
                f"{clock_text(start_time_unix_ms)}: it is a different process now; "
                "nothing was signalled"
            )
        return process

    def refuse_job_process(self, process: ProcessReading) -> None:
        """KillRefused for a Slurm job's process, unless allow_kill_job_processes."""
        if job_process_protected(process.slurm_job_id, self._allow_jobs):
            raise KillRefused(
                f"pid {process.pid} belongs to Slurm job {process.slurm_job_id}: cancel it "
                "with scancel, or set allow_kill_job_processes = true in the daemon's config"
            )

    @staticmethod
    def _describe(gpu: int, p: ProcessReading, outcome: KillOutcome, actor: str) -> str:
        started = clock_text(p.start_time_unix_ms)
        command = (p.command or "?")[:80]
        who = f"pid {p.pid} ({p.user or '?'}: {command}, started {started}) on GPU {gpu}"
        return f"{who}: {outcome.value}" + (f", asked by {actor}" if actor else "")

    def _record(self, gpu: int, detail: str, actor: str) -> None:
        event = pb.Event(time_unix_ms=int(time.time() * 1000), kind=pb.EVENT_KIND_PROCESS_KILLED,
                         gpu_index=gpu, summary=detail, actor=actor)  # fmt: skip
        self._journal.record([event])
        log.info("kill: %s", detail)
