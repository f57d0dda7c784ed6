"""The placement policy: which GPUs a workload may use, and which it should."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpufleet.v1.gpu_metrics import MEM_TOTAL_BYTES, MEM_USED_BYTES, TEMP_GPU_C, UTIL_GPU_PCT
from node_daemon.backends.readings import GpuHealth, GpuReading, ProcessReading
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
    # Processes computing on it that no workload of the queue started (someone's
    # shell, a Slurm job): the GPU is busy, whatever its free memory says.
    outside: tuple[ProcessReading, ...] = ()


def refusal(
    gpu: GpuFacts, owner: str, min_free_bytes: int, owner_teams: Sequence[str] = ()
) -> str | None:
    """Why this GPU cannot take the owner's workload now, or None if it can."""
    free = _free_bytes(gpu.reading)
    return (
        _unusable(gpu)
        or _taken(gpu)
        or _not_for(gpu, owner, min_free_bytes, owner_teams, free, "free")
    )


def standing_refusal(
    gpu: GpuFacts, owner: str, min_free_bytes: int, owner_teams: Sequence[str] = ()
) -> str | None:
    """Why the GPU could not take the owner's workload even once what runs on it ends."""
    total = gpu.reading[MEM_TOTAL_BYTES]
    return _unusable(gpu) or _not_for(gpu, owner, min_free_bytes, owner_teams, total, "in all")


def _unusable(gpu: GpuFacts) -> str | None:
    """Lost, drained or unhealthy: refused whoever asks and whatever runs on it."""
    if gpu.reading.health is GpuHealth.LOST:
        return f"GPU {gpu.reading.index} is lost"
    return gpu.condition.refusal() if gpu.condition is not None else None


def _taken(gpu: GpuFacts) -> str | None:
    """Busy now: a workload of the queue, or processes outside it, run on it."""
    if gpu.busy_with is not None:
        return f"GPU {gpu.reading.index} is already taken by workload {gpu.busy_with}"
    if gpu.outside:
        return f"GPU {gpu.reading.index} is busy: {outside_words(gpu.outside)} outside the queue"
    return None


def _not_for(
    gpu: GpuFacts,
    owner: str,
    min_free_bytes: int,
    owner_teams: Sequence[str],
    memory: int | None,
    memory_words: str,
) -> str | None:
    index = gpu.reading.index
    if gpu.reserved_for is not None and gpu.reserved_for not in (owner, *owner_teams):
        return f"GPU {index} is reserved for {gpu.reserved_for}" + (
            f" ({gpu.reserved_reason})" if gpu.reserved_reason else ""
        )
    if memory is not None and memory < min_free_bytes:
        need = min_free_bytes / 1024**3
        return f"GPU {index} has {memory / 1024**3:.1f} GiB {memory_words}, {need:.1f} GiB needed"
    return None


def outside_words(processes: Sequence[ProcessReading]) -> str:
    """ "pid 4242 (bob: python) runs", or "3 processes (pid 4242 (bob: python) and 2 more) run"."""
    first = processes[0]
    whose = ": ".join(t for t in (first.user, (first.command or "").split(" ")[0]) if t)
    named = f"pid {first.pid}" + (f" ({whose})" if whose else "")
    if len(processes) == 1:
        return f"{named} runs"
    return f"{len(processes)} processes ({named} and {len(processes) - 1} more) run"


def _free_bytes(r: GpuReading) -> int | None:
    total, used = r[MEM_TOTAL_BYTES], r[MEM_USED_BYTES]
    return None if total is None or used is None else total - used


def coolest_first(gpus: Sequence[GpuFacts]) -> list[GpuFacts]:
    """The order auto placement fills GPUs in: coolest, then least loaded, then by index."""
    return sorted(
        gpus,
        key=lambda g: (
            g.reading[TEMP_GPU_C] or 0.0,
            g.reading[UTIL_GPU_PCT] or 0.0,
            g.reading.index,
        ),
    )


def choose_gpus(
    gpus: Mapping[int, GpuFacts],
    owner: str,
    count: int,
    min_free_bytes: int,
    teams: Sequence[str] = (),
) -> list[int] | None:
    """Auto placement: GPUs that fit, coolest and least loaded first; None if too few fit."""
    fitting = [g for g in gpus.values() if refusal(g, owner, min_free_bytes, teams) is None]
    return (
        [g.reading.index for g in coolest_first(fitting)[:count]] if len(fitting) >= count else None
    )
