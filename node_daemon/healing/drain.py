"""Drain a GPU from placement in a state that calls for it; return it after a clean period.

Only what self-healing drained is returned (the condition's `drained_by`): a
person's drain is theirs to lift. Both are kept by the health assessor, so a
restarted daemon still returns the GPU; the clean period counts from the
restart then.
"""

from __future__ import annotations

from node_daemon.healing.memory import HealingMemory
from node_daemon.healing.model import ACTOR, DONE, DRAIN, UNDRAIN, Action, HeldSince, Report
from node_daemon.healing.settings import DrainSettings, HealingSettings
from node_daemon.healing.slurm_drain import SlurmDrain
from node_daemon.healing.view import HealthControl, NodeNow
from node_daemon.health.model import GpuCondition


class DrainPolicy:
    table = "drain"

    def __init__(
        self, control: HealthControl | None, memory: HealingMemory, slurm: SlurmDrain | None
    ) -> None:
        self._control, self._memory, self._slurm = control, memory, slurm
        self._clean = HeldSince()

    def decide(self, now: NodeNow, settings: HealingSettings, dry_run: bool) -> list[Action]:
        s = settings.drain
        actions = []
        for gpu, condition in sorted(now.conditions.items()):
            if condition.drain is None and condition.state in s.on_states:
                actions.append(Action(DRAIN, _why(condition), gpu))
            elif condition.drain is not None and condition.drain.by == ACTOR:
                returning = self._returning(gpu, condition, s, now.now_s)
                if returning is not None:
                    actions.append(Action(UNDRAIN, returning, gpu))
            if condition.drain is None or condition.drain.by != ACTOR:
                self._clean.forget(gpu)
        return actions

    def _returning(
        self, gpu: int, condition: GpuCondition, s: DrainSettings, now_s: float
    ) -> str | None:
        """Why to return the GPU now; None while it has not been clean long enough."""
        clean = condition.state not in s.on_states and condition.state.takes_new_work
        held = self._clean.held_for(gpu, clean, now_s)
        if held is None or held < s.return_after_clean_s:
            return None
        return f"GPU {gpu} {condition.state.words} for {held:.0f} s (return_after_clean_s)"

    def refusal(self, action: Action, now: NodeNow, settings: HealingSettings) -> str | None:
        if self._control is None:
            return "refused: no health assessor to drain with"
        return None

    def slow(self, action: Action, settings: HealingSettings) -> bool:
        return settings.drain.slurm or self._memory.state.slurm_drained

    def execute(self, action: Action, now: NodeNow, settings: HealingSettings) -> str:
        assert self._control is not None and action.gpu is not None  # refusal() said so
        if action.action == DRAIN:
            self._control.drain(action.gpu, ACTOR, action.reason, now.now_ms)
            return self._slurm_drain(action, settings)
        self._control.undrain(action.gpu, ACTOR, now.now_ms)
        self._clean.forget(action.gpu)
        others = [g for g, c in now.conditions.items()
                  if g != action.gpu and c.drain is not None and c.drain.by == ACTOR]  # fmt: skip
        return DONE if others else self._slurm_resume()

    def _slurm_drain(self, action: Action, settings: HealingSettings) -> str:
        if not settings.drain.slurm or self._slurm is None:
            return DONE
        outcome = self._slurm.drain(f"GPU {action.gpu}: {action.reason}")
        if outcome != DONE:
            return f"{DONE} in gpufleet; Slurm drain {outcome}"
        self._memory.state.slurm_drained = True
        return DONE

    def _slurm_resume(self) -> str:
        if not self._memory.state.slurm_drained or self._slurm is None:
            return DONE
        outcome = self._slurm.resume()
        self._memory.state.slurm_drained = False  # resumed, or no longer ours to resume
        return DONE if outcome == DONE else f"{DONE} in gpufleet; Slurm resume {outcome}"

    def settled(self, report: Report, now: NodeNow, settings: HealingSettings) -> None:
        """Nothing of its own to keep: the assessor keeps the drain."""


def _why(condition: GpuCondition) -> str:
    worst = next((r for r in condition.reasons if r.state is condition.state), None)
    detail = f": {worst.summary}" if worst else ""
    return f"GPU {condition.gpu_index} {condition.state.words}{detail}"
