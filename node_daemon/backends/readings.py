"""What a GPU backend reports, as plain immutable values.

`None` means "not available" (NVML NOT_SUPPORTED, a lost GPU, a field the
backend cannot read). It travels as itself to the wire, where the matching
proto3 `optional` field is left unset: never -1 or 0 for unknown.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class BackendKind(enum.Enum):
    NVML = "nvml"
    SIMULATED = "simulated"


class GpuHealth(enum.Enum):
    OK = "ok"
    LOST = "lost"
    ERROR = "error"


@dataclass(frozen=True)
class GpuStatic:
    """Facts about one GPU that do not change while the daemon runs."""

    index: int
    uuid: str
    name: str
    serial: str | None = None
    pci_bus_id: str | None = None
    memory_total_bytes: int | None = None
    power_limit_w: float | None = None
    temp_slowdown_c: float | None = None
    temp_shutdown_c: float | None = None
    vbios_version: str | None = None


@dataclass(frozen=True)
class NodeFacts:
    """Facts about the node and its driver."""

    driver_version: str | None
    cuda_version: str | None
    gpus: tuple[GpuStatic, ...]


@dataclass(frozen=True)
class ProcessReading:
    """One process holding a context on a GPU."""

    pid: int
    gpu_memory_bytes: int | None = None
    start_time_unix_ms: int | None = None
    user: str | None = None
    command: str | None = None
    container_id: str | None = None
    slurm_job_id: str | None = None


@dataclass(frozen=True)
class GpuReading:
    """One GPU at one tick. Units are in the field names."""

    index: int
    health: GpuHealth = GpuHealth.OK
    error: str = ""
    util_gpu_pct: float | None = None
    util_mem_pct: float | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    temp_gpu_c: float | None = None
    temp_mem_c: float | None = None
    power_w: float | None = None
    fan_pct: float | None = None
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    pcie_tx_bytes_per_s: int | None = None
    pcie_rx_bytes_per_s: int | None = None
    pstate: int | None = None
    throttle_reasons: int | None = None
    ecc_corrected_total: int | None = None
    ecc_uncorrected_total: int | None = None
    xids: tuple[int, ...] = field(default_factory=tuple)
    energy_j: float | None = None


def lost_reading(index: int, detail: str = "GPU is lost (fell off the bus)") -> GpuReading:
    """The reading of a GPU that NVML reports as lost: health only, no metrics."""
    return GpuReading(index=index, health=GpuHealth.LOST, error=detail)
