"""Request a GPU reset or a node reboot where the GPU's state says so: once per fault.

A reset for a GPU that needs one (HealthState.NEEDS_RESET) with no process on it
and no workload of the daemon's; a reboot when a GPU needs one and every GPU is
idle. The check is made again on a fresh process list just before the command
runs.

Once per fault, across restarts and reboots: each is kept in the daemon's state
(node_daemon.healing.memory.RepairTaken: the GPU, the fault, the boot, the time)
before its command runs, and a refusal to keep it is a refusal to run it. The GPU
is judged `verify_after_s` after a reset ends, or after the daemon's start in the
boot that followed a reboot. Still in need of the same action, or in need of it
again within the action's `cooldown_s` of being seen cured, it was not cured: the
action escalates instead of repeating. The GPU is drained and marked for
inspection (reason `repair_failed`, a critical gpu_health alert), and stays so
until an admin clears its health after the repair; then a new fault may be
repaired again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from node_daemon.backends.base import BackendUnavailable
from node_daemon.backends.readings import ProcessReading
from node_daemon.healing.commands import expand, run_command
from node_daemon.healing.memory import HealingMemory, RepairTaken
from node_daemon.healing.model import ACTOR, DONE, GPU_RESET, NODE_REBOOT, Action, Report
from node_daemon.healing.settings import CommandSettings, HealingSettings
from node_daemon.healing.view import HealthControl, NodeNow
from node_daemon.health.assessor import REPAIR_FAILED
from node_daemon.health.model import GpuCondition, HealthState
from node_daemon.journal.event_journal import JournalError

log = logging.getLogger(__name__)

FreshProcesses = Callable[[], Mapping[int, Sequence[ProcessReading]]]
ESCALATE = "escalate"  # the step that replaces a repair that did not cure


class RepairPolicy:
    """Both commands: `table` is "reset" or "reboot".

    Args:
        table: "reset" or "reboot".
        memory: where the repairs taken are kept.
        fresh: a process list read now (the last check before a command).
        host: the node's name, for the command's {host}.
        control: the health assessor, to escalate to (and to tell of a reset).
        boot_id: this boot's id (node_daemon.health.boot): a reboot's outcome is judged
            in another.
    """

    def __init__(
        self,
        table: str,
        memory: HealingMemory,
        fresh: FreshProcesses,
        host: str,
        *,
        control: HealthControl | None = None,
        boot_id: str = "",
    ) -> None:
        self.table, self._memory, self._fresh, self._host = table, memory, fresh, host
        self._control, self._boot_id = control, boot_id
        self._action = GPU_RESET if table == "reset" else NODE_REBOOT
        self._state = HealthState.NEEDS_RESET if table == "reset" else HealthState.NEEDS_REBOOT
        self._started_s: float | None = None  # this run's first tick
        self._faults: dict[str, tuple[tuple[int, str], ...]] = {}  # key -> (GPU, fault) each
        self._running: set[int] = set()  # GPUs whose command runs now

    # -- deciding ----------------------------------------------------------------------

    def decide(self, now: NodeNow, settings: HealingSettings, dry_run: bool) -> list[Action]:
        if self._started_s is None:
            self._started_s = now.now_s
        escalations = self._judge_taken(now, getattr(settings, self.table))
        return escalations + (self._resets(now) if self.table == "reset" else self._reboot(now))

    def _resets(self, now: NodeNow) -> list[Action]:
        actions = []
        for gpu, condition in sorted(now.conditions.items()):
            new = self._memory.repair(GPU_RESET, gpu) is None
            if condition.state is HealthState.NEEDS_RESET and new and now.idle(gpu):
                action = Action(GPU_RESET, f"GPU {gpu} needs reset{_detail(condition)}", gpu)
                self._faults[action.key] = ((gpu, _fault(condition)),)
                actions.append(action)
        return actions

    def _reboot(self, now: NodeNow) -> list[Action]:
        needing = [c for c in now.conditions.values() if c.state is HealthState.NEEDS_REBOOT
                   and self._memory.repair(NODE_REBOOT, c.gpu_index) is None]  # fmt: skip
        if not needing or not all(now.idle(r.index) for r in now.readings):
            return []
        gpus = ", ".join(str(c.gpu_index) for c in needing)
        action = Action(
            NODE_REBOOT, f"GPU {gpus} needs reboot{_detail(needing[0])}; every GPU idle"
        )
        self._faults[action.key] = tuple((c.gpu_index, _fault(c)) for c in needing)
        return [action]

    def _judge_taken(self, now: NodeNow, table: CommandSettings) -> list[Action]:
        """Each repair taken, judged: cured (forgotten after cooldown_s), or escalated."""
        actions, changed = [], False
        for taken in [r for r in self._memory.state.repairs if r.action == self._action]:
            condition = now.conditions.get(taken.gpu)
            if condition is None or taken.gpu in self._running:
                continue
            verdict = self._verdict(taken, condition, now, table)
            if isinstance(verdict, Action):
                actions.append(verdict)
            changed = changed or verdict is True
        if changed:
            self._memory.save_or_hold()
        return actions

    def _verdict(
        self, taken: RepairTaken, condition: GpuCondition, now: NodeNow, table: CommandSettings
    ) -> Action | bool:
        """An escalation; else whether the kept repair changed (True) or not (False)."""
        uuid = _uuid(now, taken.gpu)
        if taken.uuid and uuid and taken.uuid != uuid:
            log.info("self-healing: GPU %d is another GPU now: its %s is forgotten",
                     taken.gpu, taken.action)  # fmt: skip
            return self._forget(taken)
        if taken.escalated_s is not None:
            cleared = all(r.code != REPAIR_FAILED for r in condition.reasons)
            return self._forget(taken) if cleared else False  # cleared: a person repaired it
        if self.table == "reboot" and taken.boot_id == self._boot_id:
            return False  # the reboot has not happened yet: judged in the next boot
        start = (taken.ended_s or taken.taken_s) if self.table == "reset" else self._started_s
        if now.now_s - (start or now.now_s) < table.verify_after_s:
            return False
        if condition.state is self._state:
            return Action(self._action, _not_cured(taken, condition, now.now_s), taken.gpu,
                          step=ESCALATE)  # fmt: skip
        if taken.clean_since_s is None:
            self._memory.keep_repair(replace(taken, clean_since_s=now.now_s))
            return True
        if now.now_s - taken.clean_since_s >= table.cooldown_s:
            log.info("self-healing: GPU %d cured by its %s", taken.gpu, taken.action)
            return self._forget(taken)
        return False

    def _forget(self, taken: RepairTaken) -> bool:
        self._memory.forget_repair(taken.action, taken.gpu)
        return True

    # -- acting --------------------------------------------------------------------------

    def refusal(self, action: Action, now: NodeNow, settings: HealingSettings) -> str | None:
        if action.step == ESCALATE and self._control is None:
            return "refused: no health assessor to escalate to"
        return None

    def slow(self, action: Action, settings: HealingSettings) -> bool:
        return action.step != ESCALATE

    def execute(self, action: Action, now: NodeNow, settings: HealingSettings) -> str:
        if action.step == ESCALATE:
            return self._escalate(action, now)
        busy = self._busy(action)
        if busy is not None:
            return busy
        gpus = self._faults.get(action.key, ())
        try:
            self._keep_taken(gpus, now)
        except JournalError as exc:
            for gpu, _fault_words in gpus:
                self._memory.forget_repair(self._action, gpu)
            self._running.difference_update(g for g, _ in gpus)
            return f"refused: it could not be kept before it ran, so it might run twice ({exc})"
        started = time.monotonic()
        command = getattr(settings, self.table).command
        static = now.gpus.get(action.gpu) if action.gpu is not None else None
        argv = expand(command, {"index": action.gpu, "host": self._host,
                                "uuid": static.uuid if static else None,
                                "pci_bus_id": static.pci_bus_id if static else None})  # fmt: skip
        try:
            outcome = run_command(argv, settings.command_timeout_s, action.action)
        finally:
            self._running.difference_update(g for g, _ in gpus)
        ended_s = now.now_s + (time.monotonic() - started)
        for gpu, _fault_words in gpus:
            taken = self._memory.repair(self._action, gpu)
            if taken is not None:
                self._memory.keep_repair(replace(taken, outcome=outcome[:200], ended_s=ended_s))
        if action.action == GPU_RESET and outcome == DONE and self._control is not None:
            assert action.gpu is not None  # a reset names its GPU
            self._control.reset_done(action.gpu, int(ended_s * 1000))
        return outcome

    def _keep_taken(self, gpus: tuple[tuple[int, str], ...], now: NodeNow) -> None:
        """Kept on disk before the command runs: a reboot leaves no time afterwards, and a
        daemon that dies meanwhile must not run it again (JournalError: not kept)."""
        for gpu, fault in gpus:
            self._running.add(gpu)
            self._memory.keep_repair(
                RepairTaken(self._action, gpu, _uuid(now, gpu), fault, self._boot_id, now.now_s)
            )
        self._memory.save()

    def _escalate(self, action: Action, now: NodeNow) -> str:
        assert self._control is not None and action.gpu is not None  # refusal() said so
        condition = now.conditions.get(action.gpu)
        self._control.needs_inspection(action.gpu, action.reason, now.now_ms)
        if condition is None or condition.drain is None:
            self._control.drain(action.gpu, ACTOR, action.reason, now.now_ms)
        log.error("self-healing: %s; a person must look", action.reason)
        return DONE

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
        action = report.action
        self._faults.pop(action.key, None)
        if action.step != ESCALATE or report.dry_run or report.outcome != DONE:
            return
        assert action.gpu is not None  # an escalation names its GPU
        taken = self._memory.repair(self._action, action.gpu)
        if taken is not None:
            self._memory.keep_repair(replace(taken, escalated_s=now.now_s))


def _detail(condition: GpuCondition) -> str:
    worst = next((r for r in condition.reasons if r.state is condition.state), None)
    return f": {worst.summary}" if worst else ""


def _fault(condition: GpuCondition) -> str:
    """The fault in words: the reasons that put the GPU in its state."""
    worst = [r.summary for r in condition.reasons if r.state is condition.state]
    return f"{condition.state.words}: {'; '.join(worst)}" if worst else condition.state.words


def _uuid(now: NodeNow, gpu: int) -> str | None:
    static = now.gpus.get(gpu)
    return static.uuid if static is not None and static.uuid else None


def _not_cured(taken: RepairTaken, condition: GpuCondition, now_s: float) -> str:
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(taken.taken_s))
    how = f" ({taken.outcome})" if taken.outcome else " (its outcome unknown: the daemon stopped)"
    again = (
        f"again {now_s - taken.clean_since_s:.0f} s after it was seen cured"
        if taken.clean_since_s is not None
        else "still"
    )
    return (
        f"GPU {taken.gpu} {again} {condition.state.words}{_detail(condition)}, after the "
        f"{taken.action} of {when}{how} for {taken.fault}: not cured, so not repeated; "
        f"drained and marked for inspection (ClearGpuHealth after the repair)"
    )
