"""Usage accounting: GPU-hours, memory, energy and reservations by user and day."""

from __future__ import annotations

from node_daemon.usage.amounts import NodeAmounts, UsageAmounts, utc_day
from node_daemon.usage.meter import UsageMeter
from node_daemon.usage.store import USAGE_FILE, UsageStore, UsageStoreError

__all__ = [
    "USAGE_FILE",
    "NodeAmounts",
    "UsageAmounts",
    "UsageMeter",
    "UsageStore",
    "UsageStoreError",
    "utc_day",
]
