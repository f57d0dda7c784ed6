"""Request a GPU reset or a node reboot where the GPU's state says so, only when idle.

A reset for a GPU that needs one (HealthState.NEEDS_RESET) and has no process
on it, and no workload of the daemon's; a reboot when a GPU needs one and every
GPU is idle. The check is made again on a fresh process list just before the
command runs. Each runs once per fault (the condition's `since`), kept across
restarts, so a reset that did not cure the GPU is not repeated: the condition
stays, and a person looks (ClearGpuHealth after a repair).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from node_daemon.backends.base import BackendUnavailable
from node_daemon.backends.readings import ProcessReading
from node_daemon.healing.commands import expand, run_command
from node_daemon.healing.memory import HealingMemory
from node_daemon.healing.model import DONE, GPU_RESET, NODE_REBOOT, Action, Report
from node_daemon.healing.settings import HealingSettings
from node_daemon.healing.view import NodeNow
from node_daemon.health.model import GpuCondition, HealthState

FreshProcesses = Callable[[], Mapping[int, Sequence[ProcessReading]]]


class RepairPolicy:
    """Both commands: `table` is "reset" or "reboot"."""

    def __init__(self, table: str, memory: HealingMemory, fresh: FreshProcesses, host: str) -> None:
        self.table, self._memory, self._fresh, self._host = table, memory, fresh, host
        self._faults: dict[str, int] = {}  # action key -> the fault's since (ms)

    def decide(self, now: NodeNow, settings: HealingSettings, dry_run: bool) -> list[Action]:
        return self._resets(now) if self.table == "reset" else self._reboot(now)

    def _resets(self, now: NodeNow) -> list[Action]:
        actions = []
        for gpu, condition in sorted(now.conditions.items()):
            done_for = self._memory.state.resets.get(gpu)
            due = condition.state is HealthState.NEEDS_RESET and done_for != condition.since_ms
            if due and now.idle(gpu):
                action = Action(GPU_RESET, f"GPU {gpu} needs reset{_detail(condition)}", gpu)
                self._faults[action.key] = condition.since_ms
                actions.append(action)
        return actions

    def _reboot(self, now: NodeNow) -> list[Action]:
        needing = [c for c in now.conditions.values() if c.state is HealthState.NEEDS_REBOOT]
        if not needing or not all(now.idle(r.index) for r in now.readings):
            return []
        fault = max(c.since_ms for c in needing)
        if (
            self._memory.state.reboot_for_ms is not None
            and self._memory.state.reboot_for_ms >= fault
        ):
            return []
        gpus = ", ".join(str(c.gpu_index) for c in needing)
        action = Action(
            NODE_REBOOT, f"GPU {gpus} needs reboot{_detail(needing[0])}; every GPU idle"
        )
        self._faults[action.key] = fault
        return [action]

    def refusal(self, action: Action, now: NodeNow, settings: HealingSettings) -> str | None:
        return None

    def slow(self, action: Action, settings: HealingSettings) -> bool:
        return True

    def execute(self, action: Action, now: NodeNow, settings: HealingSettings) -> str:
        busy = self._busy(action)
        if busy is not None:
            return busy
        if action.action == NODE_REBOOT:
            # Kept first: a reboot leaves no time to write its outcome.
            self._memory.state.reboot_for_ms = self._faults.get(action.key, now.now_ms)
            self._memory.save()
        command = getattr(settings, self.table).command
        static = now.gpus.get(action.gpu) if action.gpu is not None else None
        argv = expand(command, {"index": action.gpu, "host": self._host,
                                "uuid": static.uuid if static else None,
                                "pci_bus_id": static.pci_bus_id if static else None})  # fmt: skip
        return run_command(argv, settings.command_timeout_s, action.action)

    def _busy(self, action: Action) -> str | None:
        """Why not now, by a process list read after the decision; None when idle."""
        try:
            fresh = self._fresh()
        except BackendUnavailable as exc:
            return f"refused: {exc}"
        gpus = [action.gpu] if action.gpu is not None else sorted(fresh)
        busy = sorted(p.pid for g in gpus for p in fresh.get(g, ()))
        if busy:
            return f"refused: GPU busy (pids {', '.join(map(str, busy[:10]))})"
        return None

    def settled(self, report: Report, now: NodeNow, settings: HealingSettings) -> None:
        fault = self._faults.pop(report.action.key, None)
        if report.dry_run or report.outcome != DONE or fault is None:
            return
        if report.action.action == GPU_RESET and report.action.gpu is not None:
            self._memory.state.resets[report.action.gpu] = fault


def _detail(condition: GpuCondition) -> str:
    worst = next((r for r in condition.reasons if r.state is condition.state), None)
    return f": {worst.summary}" if worst else ""
