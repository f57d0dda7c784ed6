"""A GPU's health as the daemon judges it: a state, worst first, and the reasons for it.

Plain values with no NVML, gRPC or clock in them. The assessor
(`node_daemon.health.assessor`) makes them each tick from the readings; the wire
(`node_daemon.health.wire`) turns them into `gpufleet.v1.GpuCondition`;
placement, the alert engine and self-healing read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpufleet.v1.health_states import HealthState


@dataclass(frozen=True)
class HealthReason:
    """One thing wrong with a GPU, and what it calls for."""

    code: str  # stable: "xid_79", "row_remap_pending", "ecc_storm", "telemetry_gap", ...
    state: HealthState
    summary: str  # a sentence: "Xid 79: GPU has fallen off the bus"
    action: str  # what to do: "reboot the node"
    since_ms: int
    lead_time_s: int | None = None  # a prediction's usual warning ahead of the failure


@dataclass(frozen=True)
class Drain:
    """A GPU taken out of placement: by whom (a user, or "self-healing") and why."""

    by: str
    reason: str
    since_ms: int


@dataclass(frozen=True)
class GpuCondition:
    """One GPU's health now."""

    gpu_index: int
    state: HealthState = HealthState.HEALTHY
    reasons: tuple[HealthReason, ...] = ()
    since_ms: int = 0  # since when the GPU has been in `state`
    drain: Drain | None = None
    power_capped_w: float | None = None  # self-healing's lowered power limit, if any
    xid_counts: dict[int, int] = field(default_factory=dict)  # since the daemon started

    @property
    def placeable(self) -> bool:
        """May placement put new work here? Not when drained or in a state that forbids it."""
        return self.drain is None and self.state.takes_new_work

    def refusal(self) -> str | None:
        """Why placement refuses this GPU, in words; None where it may take work."""
        if self.drain is not None:
            return f"GPU {self.gpu_index} is drained by {self.drain.by}: {self.drain.reason}"
        if not self.state.takes_new_work:
            worst = next((r for r in self.reasons if r.state is self.state), None)
            why = f": {worst.summary}" if worst else ""
            return f"GPU {self.gpu_index} {self.state.words}{why}"
        return None
