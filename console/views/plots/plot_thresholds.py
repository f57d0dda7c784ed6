"""The alert lines drawn on a plot: the node's own, else the default rule's.

A node says where its rules raise (Inventory.alert_thresholds: gpu_temp's
warning and critical as its TOML sets them); the plots draw those. A daemon
that does not say gets the `gpu_temp` defaults (node_daemon/alerts/rules.py:
warning 75 °C, critical 85 °C; docs/alerts.md). A node that sends lines, but
none for a metric (the rule is off there), gets none on that plot.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import pyqtgraph as pg

from console.fleet.columns import shown
from console.fleet.updates import AlertLine
from gpufleet.v1.alert_severity import Severity
from gpufleet.v1.gpu_metrics import TEMP_GPU_C, GpuMetric

COLOURS: Final = {
    Severity.INFO: "#63b3ed",
    Severity.WARNING: "#dd6b20",
    Severity.CRITICAL: "#e53e3e",
}


@dataclass(frozen=True)
class ThresholdLine:
    name: str  # "warning" or "critical", as the alert's severity
    value: float  # in the metric's shown unit
    colour: str


THRESHOLDS: Final[dict[GpuMetric[Any], tuple[ThresholdLine, ...]]] = {
    TEMP_GPU_C: (
        ThresholdLine("warning", 75.0, COLOURS[Severity.WARNING]),
        ThresholdLine("critical", 85.0, COLOURS[Severity.CRITICAL]),
    ),
}


def thresholds(
    metric: GpuMetric[Any], node_lines: Sequence[AlertLine] = ()
) -> tuple[ThresholdLine, ...]:
    """The lines of `metric`'s plot: the node's (any it sent), else the defaults."""
    if not node_lines:
        return THRESHOLDS.get(metric, ())
    scale = shown(metric).scale
    own = {
        (line.severity, line.value * scale) for line in node_lines if line.metric == metric.field
    }
    return tuple(
        ThresholdLine(severity.label, value, COLOURS[severity])
        for severity, value in sorted(own, key=lambda found: found[1])
    )


class PlotThresholds:
    """Draws one plot's lines and names them in its title; redrawn when they change."""

    def __init__(self, plot: pg.PlotItem, metric: GpuMetric[Any]) -> None:
        self._plot, self._metric = plot, metric
        self.lines: list[pg.InfiniteLine] = []
        self.shown: tuple[ThresholdLine, ...] | None = None

    def show(self, lines: tuple[ThresholdLine, ...]) -> None:
        if lines == self.shown:
            return
        self.shown = lines
        for line in self.lines:
            self._plot.removeItem(line)
        self.lines = [self._line(t) for t in lines]
        how = shown(self._metric)
        # Named in the title, in the lines' colours: said even while a line is out
        # of sight, and static (labels on the lines cost 1.5-2 ms a frame to re-place).
        names = " ".join(
            f'<span style="color:{t.colour}">{t.name} {t.value:.0f}</span>' for t in lines
        )
        self._plot.setTitle(
            f"{how.label} ({how.unit})" + (f" · {names}" if names else ""), size="9pt"
        )

    def _line(self, threshold: ThresholdLine) -> pg.InfiniteLine:
        line = pg.InfiniteLine(
            pos=threshold.value, angle=0, movable=False,
            pen=pg.mkPen(threshold.colour, width=1, style=pg.QtCore.Qt.PenStyle.DashLine),
        )  # fmt: skip
        # Not in the autoscale: the curve keeps the plot's height; a line shows as it nears.
        self._plot.addItem(line, ignoreBounds=True)
        return line
