"""The placement policy: which GPUs a workload may use, and which it should."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpufleet.v1.gpu_metrics import MEM_TOTAL_BYTES, MEM_USED_BYTES, TEMP_GPU_C, UTIL_GPU_PCT
from node_daemon.backends.readings import GpuHealth, GpuReading
from node_daemon.health.model import GpuCondition


@dataclass(frozen=True)
class GpuFacts:
    """What placement needs to know about one GPU right now."""

    reading: GpuReading
    reserved_for: str | None  # the holder of an active reservation
    reserved_until_ms: int | None
    reserved_reason: str
    busy_with: str | None  # id of a running workload on it
    condition: GpuCondition | None = None  # its health: drained, or needing a reset or more


def refusal(
    gpu: GpuFacts, owner: str, min_free_bytes: int, owner_teams: Sequence[str] = ()
) -> str | None:
    """Why this GPU cannot take the owner's workload, or None if it can."""
    r = gpu.reading
    if r.health is GpuHealth.LOST:
        return f"GPU {r.index} is lost"
    health = gpu.condition.refusal() if gpu.condition is not None else None
    if health is not None:
        return health
    if gpu.busy_with is not None:
        return f"GPU {r.index} is already taken by workload {gpu.busy_with}"
    if gpu.reserved_for is not None and gpu.reserved_for not in (owner, *owner_teams):
        return f"GPU {r.index} is reserved for {gpu.reserved_for}" + (
            f" ({gpu.reserved_reason})" if gpu.reserved_reason else ""
        )
    free = _free_bytes(r)
    if free is not None and free < min_free_bytes:
        need = min_free_bytes / 1024**3
        return f"GPU {r.index} has {free / 1024**3:.1f} GiB free, {need:.1f} GiB needed"
    return None


def _free_bytes(r: GpuReading) -> int | None:
    total, used = r[MEM_TOTAL_BYTES], r[MEM_USED_BYTES]
    return None if total is None or used is None else total - used


def choose_gpus(
    gpus: Mapping[int, GpuFacts],
    owner: str,
    count: int,
    min_free_bytes: int,
    teams: Sequence[str] = (),
) -> list[int] | None:
    """Auto placement: GPUs that fit, coolest and least loaded first; None if too few fit."""
    fitting = [g for g in gpus.values() if refusal(g, owner, min_free_bytes, teams) is None]
    fitting.sort(
        key=lambda g: (
            g.reading[TEMP_GPU_C] or 0.0,
            g.reading[UTIL_GPU_PCT] or 0.0,
            g.reading.index,
        )
    )
    return [g.reading.index for g in fitting[:count]] if len(fitting) >= count else None
