"""What self-healing decides and reports: plain values, no gRPC, no clock.

An `Action` is one thing the healer would do (drain GPU 3, kill pid 4242);
its `Outcome` says what became of it. Both become a gpufleet.v1.HealingAction
(node_daemon.healing.wire) on the EVENT_KIND_HEALING_ACTION event.
"""

from __future__ import annotations

from dataclasses import dataclass

from node_daemon.healing.settings import HealingSettings

# As named in HealingAction.action (the proto's contract).
DRAIN, UNDRAIN = "drain", "undrain"
POWER_CAP, POWER_RESTORE = "power_cap", "power_restore"
KILL_LEAK, REQUEUE_LEAK = "kill_leak", "requeue_leak"
GPU_RESET, NODE_REBOOT = "gpu_reset", "node_reboot"
# Restorations give back what self-healing took: never held back by the limits.
RESTORATIONS = frozenset({UNDRAIN, POWER_RESTORE})
# The settings table that enables and limits each action.
TABLE_OF = {
    DRAIN: "drain", UNDRAIN: "drain", POWER_CAP: "power_cap", POWER_RESTORE: "power_cap",
    KILL_LEAK: "memory_leak", REQUEUE_LEAK: "memory_leak", GPU_RESET: "reset",
    NODE_REBOOT: "reboot",
}  # fmt: skip

DONE, WOULD_DO, RATE_LIMITED = "done", "would do", "rate limited"
ACTOR = "self-healing"  # the audit log's user, the drain's `by`


@dataclass(frozen=True)
class Action:
    """One thing to do. `key` names its target, so the same thing is never done twice."""

    action: str
    reason: str
    gpu: int | None = None
    pid: int | None = None
    # A step before or instead of the action itself: "warn" (a leaker warned first),
    # "stand_down" (its leak stopped within the grace). Not rate limited.
    step: str = ""

    @property
    def key(self) -> str:
        gpu = "" if self.gpu is None else f"/gpu{self.gpu}"
        pid = "" if self.pid is None else f"/pid{self.pid}"
        step = f"/{self.step}" if self.step else ""
        return f"{self.action}{gpu}{pid}{step}"

    @property
    def label(self) -> str:
        """As the log and the alert name it: "kill_leak (warn)"."""
        return f"{self.action} ({self.step})" if self.step else self.action

    @property
    def table(self) -> str:
        return TABLE_OF[self.action]

    @property
    def target(self) -> str:
        """For the audit log: what it acts on."""
        if self.pid is not None:
            return f"gpu {self.gpu} pid {self.pid}"
        return "node" if self.gpu is None else f"gpu {self.gpu}"


@dataclass(frozen=True)
class Report:
    """An action and what became of it: "done", "would do", "rate limited",
    "refused: why", "failed: why", "warned: ...", "stood down: why"."""

    action: Action
    outcome: str
    dry_run: bool

    @property
    def acted(self) -> bool:
        """Something changed on the node (or, in dry-run, would have)."""
        return self.outcome in (DONE, WOULD_DO)


@dataclass(frozen=True)
class HealingPolicy:
    """What GetHealth reports (HealingPolicy): the mode, the actions enabled, the limit."""

    mode: str
    actions: tuple[str, ...]
    max_actions_per_hour: int


def policy_of(settings: HealingSettings) -> HealingPolicy:
    tables = {
        "drain": (DRAIN, UNDRAIN), "power_cap": (POWER_CAP, POWER_RESTORE),
        "reset": (GPU_RESET,), "reboot": (NODE_REBOOT,),
    }  # fmt: skip
    actions: list[str] = []
    for table, names in tables.items():
        if getattr(settings, table).enabled:
            actions += names
    if settings.memory_leak.enabled:
        actions.append(KILL_LEAK if settings.memory_leak.action == "kill" else REQUEUE_LEAK)
    order = list(TABLE_OF)
    return HealingPolicy(
        settings.mode, tuple(sorted(actions, key=order.index)), settings.max_actions_per_hour
    )


class HeldSince:
    """Since when each GPU has held a condition (hot, cool, clean), by the policy's clock."""

    def __init__(self) -> None:
        self._since: dict[int, float] = {}

    def held_for(self, gpu: int, holds: bool, now_s: float) -> float | None:
        """Seconds `gpu` has held it, 0 on its first tick; None (and forgotten) once it does not."""
        if not holds:
            self.forget(gpu)
            return None
        return now_s - self._since.setdefault(gpu, now_s)

    def forget(self, gpu: int) -> None:
        self._since.pop(gpu, None)
