"""Plain wire values in words, one place for every client: enum names, severities, times.

`gpufleet.v1` enums read as the lower-case word after their prefix
(`GPU_HEALTH_STATE_NEEDS_RESET` → "needs_reset"); a number this contract does
not know (a newer daemon's) reads as "unknown", never as an error.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from google.protobuf.message import Message

from gpufleet.v1 import node_pb2 as pb

# A generated enum (pb.KillOutcome): mypy-protobuf types each as its own wrapper class,
# which no one annotation covers; each is read only through Name and DESCRIPTOR.
ProtoEnum = Any
UNKNOWN = "unknown"
# The severities people read, in the order of the wire's numbers.
SEVERITY_NAMES = ("info", "warning", "critical")


@functools.cache
def _prefix(enum: ProtoEnum) -> str:
    """The enum's value prefix, by the proto style: GpuHealthState → 'GPU_HEALTH_STATE_'."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", enum.DESCRIPTOR.name).upper() + "_"


@functools.cache  # a few dozen (enum, number) pairs; the console asks 1,000 times a second
def enum_word(enum: ProtoEnum, value: int) -> str:
    """'needs_reset' for GPU_HEALTH_STATE_NEEDS_RESET; 'unspecified' for 0; else 'unknown'."""
    try:
        name: str = enum.Name(value)
    except ValueError:
        return UNKNOWN
    return name.removeprefix(_prefix(enum)).lower()


def known_word(enum: ProtoEnum, value: int) -> str:
    """As `enum_word`, but an unset value (0, UNSPECIFIED) reads as 'unknown' too."""
    return UNKNOWN if value == 0 else enum_word(enum, value)


# Each enum's words, by the wire number: enum_word, or known_word where unset reads as 'unknown'.
# 'info', 'warning' or 'critical'; 'unknown' for anything else.
severity_name = functools.partial(known_word, pb.Severity)
# 'terminated', 'killed', 'already_gone', 'unkillable'.
kill_outcome_word = functools.partial(enum_word, pb.KillOutcome)
# 'healthy' … 'needs_inspection': a GPU's health state, as --json carries it.
health_state_word = functools.partial(enum_word, pb.GpuHealthState)
# 'ok', 'lost', 'error' (whether NVML answers for the GPU); 'unknown' when unset.
gpu_health_word = functools.partial(known_word, pb.GpuHealth)
# 'queued', 'running', 'finished', 'failed', 'cancelled', 'timed_out'.
workload_state_word = functools.partial(enum_word, pb.WorkloadState)
# 'alert_raised', 'gpu_lost', …: an event's kind.
event_kind_word = functools.partial(enum_word, pb.EventKind)


def alert_firing(state: int) -> bool:
    return state == pb.ALERT_STATE_FIRING


def workload_queued(state: int) -> bool:
    return state == pb.WORKLOAD_STATE_QUEUED


def optional(message: Message, field: str) -> Any:
    """A proto3 `optional` field's value, or None where the node left it unset."""
    return getattr(message, field) if message.HasField(field) else None


def seconds(unix_ms: int) -> float:
    """A wire time (Unix milliseconds) as Unix seconds."""
    return unix_ms / 1000.0
