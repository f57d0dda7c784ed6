"""An alert's live value and peak, from the console's own sample ring where it can.

The daemon sends an alert's `value` when it changes and a new `peak_value` at
most every 5 s; the ring has every sample of the GPU. Where the rule watches a
catalogue metric the console shows, in the alert's unit, "Now" is the ring's
newest value and "Peak" the higher of the daemon's peak and the ring's highest
since the alert started (while the ring still holds that time).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from console.fleet.alert_rows import AlertRow
from console.fleet.columns import column, shown
from console.fleet.model import NodeRecord
from gpufleet.v1.gpu_metrics import POWER_W, TEMP_GPU_C, TEMP_MEM_C, GpuMetric

# The daemon's rules (node.proto, Alert.rule) that watch one catalogue metric.
RULE_METRICS: Final[dict[str, GpuMetric[Any]]] = {
    "gpu_temp": TEMP_GPU_C,
    "memory_temp": TEMP_MEM_C,
    "power": POWER_W,
    # temp_trend is not here: its value is a rate (°C/min), the daemon's own.
}


@dataclass(frozen=True)
class LiveValues:
    now: float | None
    peak: float | None
    live: bool  # True: read from the ring, False: the daemon's last word


def live_metric(alert: AlertRow) -> GpuMetric[Any] | None:
    """The ring metric that shows this alert's value live, if any (same unit, a GPU)."""
    metric = RULE_METRICS.get(alert.rule)
    if metric is None or alert.gpu_index is None or shown(metric).unit != alert.unit:
        return None
    return metric


def _ring_peak(node: NodeRecord, alert: AlertRow, metric: GpuMetric[Any]) -> float | None:
    """The GPU's highest value in the ring from the alert's start (to its clearing)."""
    if node.ring is None or alert.gpu_index is None or alert.gpu_index >= node.ring.gpu_count:
        return None
    times, values = node.ring.series(alert.gpu_index, column(metric))
    end_ms = alert.cleared_unix_ms if alert.cleared_unix_ms is not None else math.inf
    window = values[(times >= alert.started_unix_ms / 1000) & (times <= end_ms / 1000)]
    window = window[~np.isnan(window)]
    return float(window.max()) if window.size else None


def live_values(alert: AlertRow, node: NodeRecord | None) -> LiveValues:
    """Now and Peak of an alert, in its unit."""
    metric = live_metric(alert)
    daemon = LiveValues(alert.value, alert.peak_value, live=False)
    if metric is None or node is None or alert.gpu_index is None:
        return daemon
    now = node.value(alert.gpu_index, metric)
    if now is None:
        return daemon
    found = (alert.peak_value, alert.value, _ring_peak(node, alert, metric))
    peaks = [p for p in found if p is not None]
    return LiveValues(now, max(peaks) if peaks else None, live=True)
