"""ProcessKiller: who may be killed (a process listed on that GPU), and the record of it."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Protocol

from gpufleet.v1 import node_pb2 as pb
from node_daemon.control.kill import KillOutcome, PidReused, kill_process
from node_daemon.journal import EventJournal
from node_daemon.readings import ProcessReading
from node_daemon.sampler import Sampler

log = logging.getLogger(__name__)

MAX_GRACE_S = 300
DEFAULT_GRACE_S = 10


class KillRefused(Exception):
    """The target is not one the daemon may kill; the message says why."""


class SimulatedProcesses(Protocol):
    def remove_simulated_process(self, gpu: int, pid: int) -> bool: ...


UnkillableReport = Callable[[int, int, str], None]


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

    def kill(
        self, gpu: int, pid: int, start_time_unix_ms: int, grace_s: int, actor: str
    ) -> tuple[KillOutcome, str]:
        process = self.target(gpu, pid)
        grace = DEFAULT_GRACE_S if grace_s == 0 else min(grace_s, MAX_GRACE_S)
        if self._simulated is not None and self._simulated.remove_simulated_process(gpu, pid):
            outcome = KillOutcome.TERMINATED  # one of the simulator's own processes
        else:
            try:
                outcome = kill_process(pid, start_time_unix_ms, grace)
            except PidReused as exc:
                raise KillRefused(str(exc)) from exc
        detail = self._describe(gpu, process, outcome, actor)
        self._record(gpu, detail, actor)
        if outcome is KillOutcome.UNKILLABLE:
            self._report_unkillable(gpu, pid, detail)
        return outcome, detail

    def target(self, gpu: int, pid: int) -> ProcessReading:
        """The process as listed on the GPU, if the daemon may touch it; else KillRefused."""
        if pid <= 1:
            raise KillRefused(f"pid {pid} is never a GPU process; nothing was signalled")
        latest = self._sampler.latest
        listed = list(latest.processes.get(gpu, ())) if latest else []
        process = next((p for p in listed if p.pid == pid), None)
        if process is None:
            shown = ", ".join(str(p.pid) for p in listed) or "none"
            raise KillRefused(f"pid {pid} is not on GPU {gpu} (processes there: {shown})")
        if process.slurm_job_id and not self._allow_jobs:
            raise KillRefused(
                f"pid {pid} belongs to Slurm job {process.slurm_job_id}: cancel it with scancel, "
                "or set allow_kill_job_processes = true in the daemon's config"
            )
        return process

    @staticmethod
    def _describe(gpu: int, p: ProcessReading, outcome: KillOutcome, actor: str) -> str:
        who = f"pid {p.pid} ({p.user or '?'}: {(p.command or '?')[:80]}) on GPU {gpu}"
        return f"{who}: {outcome.value}" + (f", asked by {actor}" if actor else "")

    def _record(self, gpu: int, detail: str, actor: str) -> None:
        event = pb.Event(time_unix_ms=int(time.time() * 1000), kind=pb.EVENT_KIND_PROCESS_KILLED,
                         gpu_index=gpu, summary=detail, actor=actor)  # fmt: skip
        self._journal.record([event])
        log.info("kill: %s", detail)
