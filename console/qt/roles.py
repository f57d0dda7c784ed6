"""Item data roles of the fleet item model."""

from __future__ import annotations

from PySide6.QtCore import Qt

ROLE_BASE = int(Qt.ItemDataRole.UserRole)
KIND_ROLE = ROLE_BASE + 1  # "node" or "gpu"
TARGET_ROLE = ROLE_BASE + 2  # node HOST:PORT
GPU_INDEX_ROLE = ROLE_BASE + 3
TEMP_ROLE = ROLE_BASE + 4  # °C or None
UTIL_ROLE = ROLE_BASE + 5  # % or None
HEALTH_ROLE = ROLE_BASE + 6  # "ok", "lost", "error", or None before the first sample
MEM_ROLE = ROLE_BASE + 7  # (used_bytes, total_bytes), either None
LINK_STATE_ROLE = ROLE_BASE + 8  # LinkState of the node
MODEL_NAME_ROLE = ROLE_BASE + 9  # GPU model, e.g. "NVIDIA L40S"
POWER_ROLE = ROLE_BASE + 10  # W or None
ALERT_ROLE = ROLE_BASE + 11  # worst active alert Severity on the GPU (node: over all), or None
SLURM_ROLE = ROLE_BASE + 12  # node: (Slurm state, reason) where the node runs Slurm, else None
PLACEMENT_ROLE = ROLE_BASE + 13  # GPU: (Slurm job ids, container ids) of its processes
RESERVATION_ROLE = ROLE_BASE + 14  # GPU: the ReservationRow in force on it, or None
WORKLOAD_ROLE = ROLE_BASE + 15  # GPU: the WorkloadRow running on it, or None
# Node or GPU: why our role on the node refuses operator actions (kill, reserve...), or None
OPERATOR_REFUSAL_ROLE = ROLE_BASE + 16
