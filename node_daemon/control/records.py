"""Reservations and workloads as the daemon keeps them: immutable values.

A change is a new value (`dataclasses.replace`), so a record handed to a
caller or an RPC thread can never change under it, and none needs copying.
They become gpufleet.v1 messages only at the edge, in one place
(node_daemon.control.wire): RPC answers, the events that carry them, and the
bodies the journal stores.

`None` is "not set" (a workload that has not started has no pid), as the
proto3 `optional` fields it becomes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from gpufleet.states import WorkloadState


@dataclass(frozen=True)
class Reservation:
    """GPUs held for a user or a team ("team:NAME") until a time."""

    id: str
    gpu_indices: tuple[int, ...]
    holder: str
    until_unix_ms: int
    reason: str
    created_by: str
    created_unix_ms: int
    active: bool = True
    ended_unix_ms: int | None = None  # set once released early or expired


@dataclass(frozen=True)
class WorkloadRequest:
    """What a submitter asks to run; `owner` empty: the submitter."""

    argv: tuple[str, ...]
    gpu_count: int
    owner: str = ""
    name: str = ""
    env: Mapping[str, str] = field(default_factory=dict)
    min_free_memory_bytes: int = 0
    auto_place: bool = False
    priority: int = 0  # higher first
    time_limit_s: int = 0  # 0: the node's default_time_limit_s
    idempotency_key: str = ""
    moved_from: str = ""  # "NODE/ID" the fleet queue moved it from


@dataclass(frozen=True)
class Workload:
    """A command in the node's queue, and its life: queued, running, ended.

    `env` is private to its owner, operators of the owner's team and admins:
    the wire leaves it out for anyone else (node_daemon.control.wire).
    """

    id: str
    name: str
    argv: tuple[str, ...]
    env: Mapping[str, str]
    owner: str
    run_as: str  # the local account it runs as
    gpu_count: int
    min_free_memory_bytes: int
    auto_place: bool
    state: WorkloadState
    queued_unix_ms: int
    gpu_indices: tuple[int, ...] = ()
    pid: int | None = None
    pid_start_unix_ms: int | None = None
    started_unix_ms: int | None = None
    ended_unix_ms: int | None = None
    exit_code: int | None = None
    detail: str = ""
    priority: int = 0
    time_limit_s: int = 0  # 0: none
    idempotency_key: str = ""
    moved_from: str = ""
    # Who submitted it as this node authenticated them; "" unauthenticated or the daemon's own.
    submitted_by: str = ""
    # Placement's view of a queued workload, each tick; shown, never journaled.
    wait_reason: str = ""
    held_gpu_indices: tuple[int, ...] = ()

    @property
    def ends_by_unix_ms(self) -> int | None:
        """When its time limit stops it (TERM), if it runs and has one."""
        if self.started_unix_ms is None or not self.time_limit_s:
            return None
        return self.started_unix_ms + self.time_limit_s * 1000
