"""The warning and critical lines drawn on the temperature plot.

Where they come from: the daemon's `gpu_temp` rule defaults (node_daemon/alerts/
rules.py: warning 75 °C, critical 85 °C; docs/alerts.md). The contract does not
carry a node's rule settings (Inventory has the GPU's own slowdown and shutdown
temperatures, not the alert lines), so the console draws the defaults; a node
whose TOML moves the lines still raises its alerts at its own values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from gpufleet.v1.gpu_metrics import TEMP_GPU_C, GpuMetric


@dataclass(frozen=True)
class ThresholdLine:
    name: str  # "warning" or "critical", as the alert's severity
    value: float  # in the metric's shown unit
    colour: str


THRESHOLDS: Final[dict[GpuMetric[Any], tuple[ThresholdLine, ...]]] = {
    TEMP_GPU_C: (
        ThresholdLine("warning", 75.0, "#dd6b20"),
        ThresholdLine("critical", 85.0, "#e53e3e"),
    ),
}


def thresholds(metric: GpuMetric[Any]) -> tuple[ThresholdLine, ...]:
    return THRESHOLDS.get(metric, ())
