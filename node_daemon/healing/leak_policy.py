"""Kill or requeue a process whose memory leak threatens its GPU: a warning first.

The memory_leak alert names the process. Self-healing warns (an event, an
alert naming the process and the deadline), waits `grace_s`, and acts only if
the alert still holds for that very process (pid and start time) then; a leak
that stops within the grace stands the warning down. Only processes of
workloads gpufleet launched, unless `allow_foreign`. A kill goes through the
ProcessKiller with its safety (the process listed on the GPU now, pid and
start time, pidfd, TERM then KILL); a requeue cancels the workload and queues
the same request again.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import fields, replace

from gpufleet.states import WorkloadState
from node_daemon.backends.readings import ProcessReading
from node_daemon.control.kill import KillOutcome
from node_daemon.control.kill_service import KillRefused, ProcessKiller
from node_daemon.control.records import Workload, WorkloadRequest
from node_daemon.control.workloads import WorkloadManager
from node_daemon.errors import DomainError
from node_daemon.healing.memory import HealingMemory, LeakWarning
from node_daemon.healing.model import ACTOR, DONE, KILL_LEAK, REQUEUE_LEAK, Action, Report
from node_daemon.healing.process_tree import ancestors
from node_daemon.healing.settings import HealingSettings
from node_daemon.healing.view import NodeNow

log = logging.getLogger(__name__)

WARN, STAND_DOWN = "warn", "stand_down"
RULE = "memory_leak"


class LeakPolicy:
    table = "memory_leak"

    def __init__(
        self,
        memory: HealingMemory,
        killer: ProcessKiller | None,
        workloads: WorkloadManager | None,
    ) -> None:
        self._memory, self._killer, self._workloads = memory, killer, workloads

    def decide(self, now: NodeNow, settings: HealingSettings, dry_run: bool) -> list[Action]:
        s = settings.memory_leak
        kind = KILL_LEAK if s.action == "kill" else REQUEUE_LEAK
        leaking = _leakers(now)
        if not dry_run:  # a dry run's pretend warnings end with it
            self._memory.state.warnings = [w for w in self._memory.state.warnings if not w.dry_run]
        actions = []
        for (gpu, pid), (process, summary) in sorted(leaking.items()):
            warning = self._warning(gpu, process, dry_run)
            if warning is None:
                deadline = _clock(now.now_s + s.grace_s)
                actions.append(Action(kind, f"{summary}; {s.action} at {deadline} unless the "
                                            f"leak stops", gpu, pid, WARN))  # fmt: skip
            elif now.now_s >= warning.deadline_s:
                actions.append(Action(kind, f"{summary}; still leaking after {s.grace_s:g} s "
                                            "of grace", gpu, pid))  # fmt: skip
        for warning in self._memory.state.warnings:
            if warning.dry_run == dry_run and (warning.gpu, warning.pid) not in leaking:
                why = f"GPU {warning.gpu}: process {warning.pid}'s leak stopped, or it ended"
                actions.append(Action(kind, why, warning.gpu, warning.pid, STAND_DOWN))
        return actions

    def _warning(self, gpu: int, process: ProcessReading, dry_run: bool) -> LeakWarning | None:
        start = process.start_time_unix_ms or 0
        return next((w for w in self._memory.state.warnings
                     if (w.gpu, w.pid, w.dry_run, w.start_time_unix_ms)
                     == (gpu, process.pid, dry_run, start)), None)  # fmt: skip

    def refusal(self, action: Action, now: NodeNow, settings: HealingSettings) -> str | None:
        if action.step == STAND_DOWN or action.pid is None or action.gpu is None:
            return None
        s = settings.memory_leak
        if action.action == REQUEUE_LEAK:
            if self._workload_of(action.pid) is None:
                return f"refused: pid {action.pid} is no process of a workload gpufleet launched"
        elif not s.allow_foreign and self._workload_of(action.pid) is None:
            return (f"refused: pid {action.pid} was not launched by gpufleet "
                    "(memory_leak.allow_foreign = false)")  # fmt: skip
        if action.action == KILL_LEAK and self._killer is None:
            return "refused: no process killer"
        return None

    def slow(self, action: Action, settings: HealingSettings) -> bool:
        return action.step == "" and action.action == KILL_LEAK  # TERM, grace, KILL

    def execute(self, action: Action, now: NodeNow, settings: HealingSettings) -> str:
        if action.step == WARN:
            deadline = _clock(now.now_s + settings.memory_leak.grace_s)
            return f"warned: {settings.memory_leak.action} at {deadline} unless the leak stops"
        if action.step:
            return "stood down: the leak stopped"
        assert action.gpu is not None and action.pid is not None
        if action.action == REQUEUE_LEAK:
            return self._requeue(action.pid)
        return self._kill(action.gpu, action.pid, settings)

    def _kill(self, gpu: int, pid: int, settings: HealingSettings) -> str:
        assert self._killer is not None
        warning = next((w for w in self._memory.state.warnings
                        if (w.gpu, w.pid, w.dry_run) == (gpu, pid, False)), None)  # fmt: skip
        start = warning.start_time_unix_ms if warning else 0
        allow_foreign = settings.memory_leak.allow_foreign

        def authorise(process: ProcessReading) -> None:
            # Asked again of the fresh listing: the pid may have changed hands.
            if not allow_foreign and self._workload_of(process.pid) is None:
                raise KillRefused(f"pid {process.pid} was not launched by gpufleet")

        try:
            outcome, detail = self._killer.kill(
                gpu, pid, start, int(settings.memory_leak.kill_grace_s), ACTOR, authorise
            )
        except DomainError as exc:
            return f"refused: {exc}"
        if outcome is KillOutcome.UNKILLABLE:
            return f"failed: {detail}"
        return DONE

    def _requeue(self, pid: int) -> str:
        workload = self._workload_of(pid)
        if workload is None or self._workloads is None:
            return f"refused: pid {pid} is no longer a workload's"
        try:
            self._workloads.cancel(workload.id, ACTOR)
            again = self._workloads.submit(requeue_request(workload), ACTOR, workload.run_as)
        except DomainError as exc:
            return f"failed: {exc}"
        log.info("self-healing: workload %s requeued as %s", workload.id, again.id)
        return DONE

    def _workload_of(self, pid: int) -> Workload | None:
        """The running workload whose process (or an ancestor of it) `pid` is."""
        if self._workloads is None:
            return None
        running = {w.pid: w for w in self._workloads.workloads(False)
                   if w.state is WorkloadState.RUNNING and w.pid}  # fmt: skip
        return next((running[p] for p in (pid, *ancestors(pid)) if p in running), None)

    def settled(self, report: Report, now: NodeNow, settings: HealingSettings) -> None:
        action, state = report.action, self._memory.state
        if action.pid is None or action.gpu is None:
            return
        target = (action.gpu, action.pid, report.dry_run)
        mine = [w for w in state.warnings if (w.gpu, w.pid, w.dry_run) == target]
        if action.step == WARN:
            if report.acted or report.outcome.startswith("warned"):
                process = _listed(now.processes, action.gpu, action.pid)
                start = (process.start_time_unix_ms if process else None) or 0
                deadline = now.now_s + settings.memory_leak.grace_s
                state.warnings.append(
                    LeakWarning(action.gpu, action.pid, start, deadline, report.dry_run)
                )
            return
        state.warnings = [w for w in state.warnings if w not in mine]
        if report.dry_run and action.step == "" and report.acted:
            # Kept, acted on: a dry run says "would kill" once, not once per grace period.
            state.warnings += [replace(w, deadline_s=math.inf) for w in mine]


def _leakers(now: NodeNow) -> dict[tuple[int, int], tuple[ProcessReading, str]]:
    """(GPU, pid) of each firing memory_leak alert whose process is listed, with its words."""
    found = {}
    for alert in now.alerts:
        if alert.rule != RULE or alert.gpu_index is None or alert.pid is None:
            continue
        process = _listed(now.processes, alert.gpu_index, alert.pid)
        if process is not None:
            found[(alert.gpu_index, alert.pid)] = (process, alert.summary)
    return found


def _listed(
    processes: Mapping[int, Sequence[ProcessReading]], gpu: int, pid: int
) -> ProcessReading | None:
    return next((p for p in processes.get(gpu, ()) if p.pid == pid), None)


def requeue_request(workload: Workload) -> WorkloadRequest:
    """The request `workload` was queued with, to queue it again: every field of it.

    Built from WorkloadRequest's own fields (a Workload keeps each under the same name),
    so a field added to the request is carried over without touching this; a field
    picked by hand here once lost the priority and the time limit. All but one: the
    idempotency key, which would hand back the cancelled run instead of a new one.
    """
    kept = {f.name: getattr(workload, f.name) for f in fields(WorkloadRequest)}
    return WorkloadRequest(**{**kept, "env": dict(workload.env), "idempotency_key": ""})


def _clock(unix_s: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(unix_s))
