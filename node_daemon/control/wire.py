"""Reservation, Workload <-> gpufleet.v1 messages: RPC answers, events, journal bodies.

The journal stores each record as its serialized message (the format state
directories already hold), so `*_body` and `*_from_body` are the only way
records reach the disk and come back.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from google.protobuf.message import Message

from gpufleet.states import WorkloadState
from gpufleet.v1 import node_pb2 as pb
from node_daemon.control.limits import within_limits
from node_daemon.control.records import Reservation, Workload, WorkloadRequest

_STATES = {
    WorkloadState.QUEUED: pb.WORKLOAD_STATE_QUEUED,
    WorkloadState.RUNNING: pb.WORKLOAD_STATE_RUNNING,
    WorkloadState.FINISHED: pb.WORKLOAD_STATE_FINISHED,
    WorkloadState.FAILED: pb.WORKLOAD_STATE_FAILED,
    WorkloadState.CANCELLED: pb.WORKLOAD_STATE_CANCELLED,
    WorkloadState.TIMED_OUT: pb.WORKLOAD_STATE_TIMED_OUT,
}
_RECORD_STATES = {number: state for state, number in _STATES.items()}

_RESERVATION_PLAIN = (
    "id", "holder", "until_unix_ms", "reason", "created_by", "created_unix_ms", "active",
)  # fmt: skip
_WORKLOAD_PLAIN = (
    "id", "name", "owner", "run_as", "gpu_count", "min_free_memory_bytes", "auto_place",
    "queued_unix_ms", "detail", "priority", "time_limit_s", "idempotency_key", "moved_from",
    "wait_reason", "submitted_by",
)  # fmt: skip
_WORKLOAD_OPTIONAL = ("pid", "pid_start_unix_ms", "started_unix_ms", "ended_unix_ms", "exit_code")


def reservation_message(reservation: Reservation) -> pb.Reservation:
    message = pb.Reservation(
        gpu_indices=reservation.gpu_indices,
        **{name: getattr(reservation, name) for name in _RESERVATION_PLAIN},
    )
    if reservation.ended_unix_ms is not None:
        message.ended_unix_ms = reservation.ended_unix_ms
    return message


def reservation_record(message: pb.Reservation) -> Reservation:
    return Reservation(
        gpu_indices=tuple(message.gpu_indices),
        ended_unix_ms=message.ended_unix_ms if message.HasField("ended_unix_ms") else None,
        **{name: getattr(message, name) for name in _RESERVATION_PLAIN},
    )


def workload_message(workload: Workload, with_env: bool = True) -> pb.Workload:
    """The workload as sent; `with_env` False: as anyone may see it (events, other users)."""
    message = pb.Workload(
        argv=workload.argv,
        gpu_indices=workload.gpu_indices,
        held_gpu_indices=workload.held_gpu_indices,
        state=_STATES[workload.state],
        **{name: getattr(workload, name) for name in _WORKLOAD_PLAIN},
    )
    if with_env:
        message.env.update(workload.env)
    elif workload.env:
        message.env_hidden = True
    for name in _WORKLOAD_OPTIONAL:
        value = getattr(workload, name)
        if value is not None:
            setattr(message, name, value)
    return message


def workload_messages(workloads: Iterable[Workload]) -> list[pb.Workload]:
    """Whole workloads, environment included: for code of the daemon's own (QueryUsage)."""
    return [workload_message(w) for w in workloads]


def workload_record(message: pb.Workload) -> Workload:
    any_message: Message = message  # HasField by name
    optional: dict[str, Any] = {
        name: getattr(message, name) if any_message.HasField(name) else None
        for name in _WORKLOAD_OPTIONAL
    }
    return Workload(
        argv=tuple(message.argv),
        env=dict(message.env),
        gpu_indices=tuple(message.gpu_indices),
        held_gpu_indices=tuple(message.held_gpu_indices),
        state=_RECORD_STATES[message.state],
        **{name: getattr(message, name) for name in _WORKLOAD_PLAIN},
        **optional,
    )


def workload_request(message: pb.SubmitWorkloadRequest) -> WorkloadRequest:
    return WorkloadRequest(
        argv=tuple(message.argv), gpu_count=message.gpu_count, owner=message.owner,
        name=message.name, env=dict(message.env),
        min_free_memory_bytes=message.min_free_memory_bytes, auto_place=message.auto_place,
        priority=message.priority, time_limit_s=message.time_limit_s,
        idempotency_key=message.idempotency_key, moved_from=message.moved_from,
    )  # fmt: skip


# -- the journal's stored bodies -------------------------------------------------------


def reservation_body(reservation: Reservation) -> bytes:
    return reservation_message(reservation).SerializeToString()


def reservation_from_body(body: bytes) -> Reservation:
    return reservation_record(pb.Reservation.FromString(body))


def workload_body(workload: Workload) -> bytes:
    # What placement thinks this tick is not a fact to keep.
    stored = replace(workload, wait_reason="", held_gpu_indices=())
    return workload_message(stored).SerializeToString()


def workload_from_body(body: bytes) -> Workload:
    # A journal written before the limits may hold megabytes of free text: cut when read.
    return within_limits(workload_record(pb.Workload.FromString(body)))
