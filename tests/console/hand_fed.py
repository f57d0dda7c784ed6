"""A node's updates made by hand, as the network thread would decode them from a daemon
on the simulated backend: for the tests and benches that feed a fleet model or a
session's inbox without a daemon."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from console.fleet.columns import COLUMN_COUNT, column
from console.fleet.updates import (
    GpuInfo,
    GpuSnapshot,
    InventoryUpdate,
    LinkState,
    LinkUpdate,
    NodeInfo,
    SamplesUpdate,
)

GIB = 1 << 30


def gpus_of(
    count: int,
    uuid_prefix: str = "GPU-",
    model: str = "H100",
    memory_total_bytes: int | None = 80 * GIB,
    power_limit_w: float | None = 700.0,
) -> tuple[GpuInfo, ...]:
    """`count` GPUs alike, indexed from 0, each with the uuid `uuid_prefix` + its index."""
    return tuple(
        GpuInfo(i, f"{uuid_prefix}{i}", model, None, None, memory_total_bytes, power_limit_w)
        for i in range(count)
    )


def simulated_node(hostname: str, gpus: tuple[GpuInfo, ...]) -> NodeInfo:
    """The inventory of a node on the simulated backend (driver 550, CUDA 12.4, a 1 s tick)."""
    return NodeInfo(hostname=hostname, driver_version="550", cuda_version="12.4",
                    daemon_version="0.1", backend="simulated", backend_ok=True,
                    backend_detail="", sample_interval_s=1.0, gpus=gpus)  # fmt: skip


def node_up(target: str, info: NodeInfo) -> tuple[InventoryUpdate, LinkUpdate]:
    """What the network thread reports once a node answers: its inventory, then the link
    connected."""
    return InventoryUpdate(target, info), LinkUpdate(target, LinkState.CONNECTED)


def samples(
    target: str, time_s: float, gpus: int, readings: Mapping[str, float | npt.ArrayLike]
) -> SamplesUpdate:
    """One live tick of `gpus` GPUs, all healthy: each metric's reading (one for every GPU,
    or one a GPU), every other metric not reported."""
    rows = np.full((gpus, COLUMN_COUNT), np.nan, np.float32)
    for metric, values in readings.items():
        rows[:, column(metric)] = values
    snapshots = tuple(GpuSnapshot(i, "ok", "", ()) for i in range(gpus))
    return SamplesUpdate(target, time_s, rows, snapshots, False)
