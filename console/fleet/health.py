"""A GPU's health as the console holds it: the daemon's judgement and the signals behind it.

Plain records decoded from gpufleet.v1.GpuCondition, GpuSample's health fields,
MigInstance and HealingAction (console.connections.decode); no Qt, no protobuf.
The daemon judges; the console shows the judgement, and predicts from it the
refusals placement will give (a drained GPU, or one that needs a reset, a
reboot or inspection, takes no new work).
"""

from __future__ import annotations

from dataclasses import dataclass

from console.fleet.process_row import ProcessRow
from gpufleet.v1.health_states import HealthState


@dataclass(frozen=True)
class HealthReason:
    """One thing wrong with a GPU, and what it calls for."""

    code: str  # "xid_79", "row_remap_pending", "ecc_storm", ...
    state: HealthState
    summary: str  # "Xid 79: GPU has fallen off the bus"
    action: str  # "reboot the node"
    since_unix_ms: int
    lead_time_s: int | None = None  # a prediction's usual warning ahead of the failure


@dataclass(frozen=True)
class GpuCondition:
    """One GPU's health as its node judged it: a state, its reasons, and placement."""

    gpu_index: int
    state: HealthState
    reasons: tuple[HealthReason, ...] = ()
    since_unix_ms: int = 0
    drained: bool = False
    drained_by: str = ""
    drain_reason: str = ""
    power_capped_w: float | None = None  # self-healing's lowered power limit

    @property
    def healthy(self) -> bool:
        """Nothing to show on a tile: healthy and in placement."""
        return self.state is HealthState.HEALTHY and not self.drained

    def worst_reason(self) -> HealthReason | None:
        """The first reason that put the GPU in its state (the daemon lists worst first)."""
        found = [r for r in self.reasons if r.state is self.state]
        return found[0] if found else (self.reasons[0] if self.reasons else None)

    def placement_refusal(self) -> str | None:
        """Why the node will place no new work here, in words; None where it will.

        The daemon's own words (node_daemon.health.model.GpuCondition.refusal).
        """
        if self.drained:
            why = f": {self.drain_reason}" if self.drain_reason else ""
            return f"GPU {self.gpu_index} is drained by {self.drained_by or 'someone'}{why}"
        if not self.state.takes_new_work:
            worst = self.worst_reason()
            why = f": {worst.summary}" if worst else ""
            return f"GPU {self.gpu_index} {self.state.words}{why}"
        return None


@dataclass(frozen=True)
class HealthSignals:
    """The RAS counters of one GPU's newest sample; None: the GPU does not report it."""

    pcie_replay_total: int | None = None
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    row_remap_pending: bool | None = None
    row_remap_failure: bool | None = None
    retired_pages_sbe: int | None = None
    retired_pages_dbe: int | None = None
    retired_pages_pending: bool | None = None
    nvlink_crc_flit_errors_total: int | None = None
    nvlink_crc_data_errors_total: int | None = None
    nvlink_replay_errors_total: int | None = None
    nvlink_recovery_errors_total: int | None = None
    nvlink_links_active: int | None = None
    nvlink_links_down: int | None = None
    nvlink_down_links: tuple[int, ...] = ()
    recovery_action: int | None = None
    power_limit_w: float | None = None
    # Xid errors since the daemon started: (code, count), by code.
    xid_counts: tuple[tuple[int, int], ...] = ()


NO_SIGNALS = HealthSignals()


@dataclass(frozen=True)
class MigInstanceRow:
    """One instance of a MIG-enabled GPU (dcgm-exporter's GPU_I_ID, GPU_I_PROFILE)."""

    gpu_instance_id: int
    compute_instance_id: int
    profile: str  # "1g.10gb"
    uuid: str  # "MIG-..."
    mem_used_bytes: int | None
    mem_total_bytes: int | None
    processes: tuple[ProcessRow, ...] = ()


@dataclass(frozen=True)
class HealingRow:
    """Something self-healing did, or in dry-run would have done (gpufleet.v1.HealingAction)."""

    action: str  # "drain", "power_cap", "gpu_reset", ...
    gpu_index: int | None
    dry_run: bool
    reason: str
    outcome: str  # "done", "would do", "refused: GPU busy", "failed: ..."
    pid: int | None = None

    @property
    def acted(self) -> bool:
        """Not a dry run: self-healing did it, or tried to and was refused or failed."""
        return not self.dry_run


@dataclass(frozen=True)
class FaultIncidentRow:
    """One incident of a GPU's fault record (gpufleet.v1.FaultIncident)."""

    kind: str  # "xid" for an Xid burst; else the health reason's code ("gpu_lost", ...)
    state: HealthState  # the worst it called for
    started_unix_ms: int
    last_unix_ms: int
    count: int  # Xids in the burst
    xid_codes: tuple[int, ...]
    ended: bool


@dataclass(frozen=True)
class FaultRecordRow:
    """A GPU's fault record as GetHealth sends it: its score and incidents, oldest first."""

    gpu_index: int
    reliability_score: float
    incidents: tuple[FaultIncidentRow, ...] = ()


@dataclass(frozen=True)
class HealingPolicyRow:
    """What a node's self-healing may do ([healing] in its daemon.toml, via GetHealth),
    and, from the same answer, each GPU's fault record (none from an older daemon)."""

    target: str
    mode: str  # "off", "dry-run" or "on"
    actions: tuple[str, ...]  # as HealingAction.action names them
    max_actions_per_hour: int
    fault_records: tuple[FaultRecordRow, ...] = ()

    def fault_record(self, gpu: int) -> FaultRecordRow | None:
        return next((r for r in self.fault_records if r.gpu_index == gpu), None)
