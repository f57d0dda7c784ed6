"""Where a workload and a silence are in their lives: one definition for both sides.

The daemon keeps its records in these states (node_daemon.control.records,
node_daemon.alerts.silences) and the console mirrors them (console.fleet.control,
console.fleet.silences). Workloads convert to and from gpufleet.v1.WorkloadState
at each side's edge (node_daemon.control.wire, console.connections.decode); a
silence's state is not sent at all, each side reads it off the silence's window
with `silence_state`. So the values here are words, not the wire's numbers: words
that people read and that `gpufleet queue --json` prints. No protobuf, no I/O.
"""

from __future__ import annotations

import enum


class WorkloadState(enum.Enum):
    QUEUED = "queued"
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed out"  # stopped at its time limit, as Slurm's TIMEOUT

    @property
    def ended(self) -> bool:
        return self not in (WorkloadState.QUEUED, WorkloadState.RUNNING)

    @property
    def rank(self) -> int:
        """How far along its life a workload is: records never move back."""
        return {WorkloadState.QUEUED: 0, WorkloadState.RUNNING: 1}.get(self, 2)


class SilenceState(enum.Enum):
    PENDING = "pending"  # a maintenance window not yet begun
    ACTIVE = "active"
    EXPIRED = "expired"


def silence_state(starts_unix_ms: int, ends_unix_ms: int, now_unix_ms: int) -> SilenceState:
    """A silence's state now, from its window: it covers [start, end)."""
    if now_unix_ms >= ends_unix_ms:
        return SilenceState.EXPIRED
    if now_unix_ms < starts_unix_ms:
        return SilenceState.PENDING
    return SilenceState.ACTIVE
