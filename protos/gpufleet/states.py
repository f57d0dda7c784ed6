"""Where a workload is in its life: one enum for the daemon and the console.

The daemon keeps its records in these states (node_daemon.control.records) and
the console mirrors them (console.fleet.control); both convert to and from
gpufleet.v1.WorkloadState at their edge (node_daemon.control.wire,
console.connections.decode), so the values here are words, not the wire's
numbers: words that people read and that `gpufleet queue --json` prints.
No protobuf, no I/O.
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
