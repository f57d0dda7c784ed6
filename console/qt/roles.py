"""Item data roles of the fleet item model."""

from __future__ import annotations

from typing import Any, NamedTuple

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, Qt

from console.fleet import columns
from console.fleet.columns import Row
from console.fleet.control import ReservationRow, WorkloadRow
from console.fleet.health import GpuCondition
from gpufleet.v1.alert_severity import Severity
from gpufleet.v1.gpu_metrics import GpuMetric

ROLE_BASE = int(Qt.ItemDataRole.UserRole)
KIND_ROLE = ROLE_BASE + 1  # "node" or "gpu"
TARGET_ROLE = ROLE_BASE + 2  # node HOST:PORT
GPU_INDEX_ROLE = ROLE_BASE + 3
# GPU: its newest ring row (float32, a column per shown metric, NaN: not available), or
# None before the first sample. Read one metric with `value`, or the row once for several.
METRIC_ROLE = ROLE_BASE + 4
HEALTH_ROLE = ROLE_BASE + 6  # "ok", "lost", "error", or None before the first sample
LINK_STATE_ROLE = ROLE_BASE + 8  # LinkState of the node
MODEL_NAME_ROLE = ROLE_BASE + 9  # GPU model, e.g. "NVIDIA L40S"
ALERT_ROLE = ROLE_BASE + 11  # worst active alert Severity on the GPU (node: over all), or None
SLURM_ROLE = ROLE_BASE + 12  # node: (Slurm state, reason) where the node runs Slurm, else None
PLACEMENT_ROLE = ROLE_BASE + 13  # GPU: (Slurm job ids, container ids) of its processes
RESERVATION_ROLE = ROLE_BASE + 14  # GPU: the ReservationRow in force on it, or None
WORKLOAD_ROLE = ROLE_BASE + 15  # GPU: the WorkloadRow running on it, or None
# Node or GPU: why our role on the node refuses operator actions (kill, reserve...), or None
OPERATOR_REFUSAL_ROLE = ROLE_BASE + 16
# Node or GPU: how long the node has been quiet (console.fleet.staleness.Quiet: stale,
# not responding, seconds since its last batch), or None while its data flows.
QUIET_ROLE = ROLE_BASE + 17
# GPU: the node's judgement of its health (console.fleet.health.GpuCondition), or None
# before the first sample or from a daemon that judges none.
CONDITION_ROLE = ROLE_BASE + 18
# Node or GPU: why our role on the node refuses admin actions (clear health...), or None
ADMIN_REFUSAL_ROLE = ROLE_BASE + 19
# GPU: a TileData, everything its tile paints, in one read (a tile is painted
# about 20 times a second per changed node; five separate reads were half its cost).
TILE_ROLE = ROLE_BASE + 20


class TileData(NamedTuple):
    """A GPU's tile in one read: what HEALTH, METRIC, CONDITION, RESERVATION,
    WORKLOAD and ALERT_ROLE give one by one."""

    health: str | None
    row: Row | None
    condition: GpuCondition | None
    reservation: ReservationRow | None
    workload: WorkloadRow | None
    alert: Severity | None


def value(index: QModelIndex | QPersistentModelIndex, metric: GpuMetric[Any]) -> float | None:
    """A GPU's newest value of a catalogue metric, in its shown unit; None: not available."""
    return columns.value(index.data(METRIC_ROLE), metric)
