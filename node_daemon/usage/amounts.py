"""What usage accounting adds up: per (day, user) amounts and per-day node totals."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Self

GIB = 1024**3
# A user's teams as reservation holders: ("team:ml", ...), as config.teams_of gives them.
TeamsOf = Callable[[str], Sequence[str]]


def utc_day(timestamp_s: float) -> str:
    """The UTC calendar day of a Unix timestamp, as "YYYY-MM-DD"."""
    return dt.datetime.fromtimestamp(timestamp_s, dt.UTC).date().isoformat()


class _Summable:
    """Field-wise addition for the frozen float records below."""

    def values(self) -> tuple[float, ...]:
        # The fields in their order (a dataclass sets them in __init__ in that order);
        # dataclasses.fields per call was most of a year's usage report.
        return tuple(self.__dict__.values())

    def __add__(self, other: Self) -> Self:
        return type(self)(*(a + b for a, b in zip(self.values(), other.values(), strict=True)))


@dataclass(frozen=True)
class UsageAmounts(_Summable):
    """What one user (or reservation holder) used on one day. Seconds are GPU-seconds."""

    # A process of the user held the GPU (raw occupancy; a shared GPU is split equally).
    gpu_seconds: float = 0.0
    # The same, weighted by the GPU's utilisation.
    busy_gpu_seconds: float = 0.0
    # The process's own GPU memory * time.
    memory_gib_seconds: float = 0.0
    # The GPU's power * time, split like gpu_seconds.
    energy_joules: float = 0.0
    # An active reservation for this holder covered the GPU.
    reserved_seconds: float = 0.0
    # ... while the holder did not use it (no process of theirs, or utilisation <= 5 %).
    reserved_idle_seconds: float = 0.0


@dataclass(frozen=True)
class NodeAmounts(_Summable):
    """The node's own totals for one day, for the KPIs. Seconds are GPU-seconds."""

    # Healthy GPUs that reported utilisation * time: the node's observed capacity.
    gpu_seconds: float = 0.0
    # The same, weighted by utilisation (mean utilisation = busy / gpu_seconds).
    busy_gpu_seconds: float = 0.0
    # GPU-seconds a GPU had a process on it or an active reservation.
    allocated_seconds: float = 0.0
    # ... of which the GPU was idle (utilisation <= 5 %).
    allocated_idle_seconds: float = 0.0
    # All GPUs' power * time, attributed or not.
    energy_joules: float = 0.0


USAGE_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(UsageAmounts))
NODE_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(NodeAmounts))
