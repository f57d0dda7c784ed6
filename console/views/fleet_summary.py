"""FleetSummary: one line in the status bar about the whole fleet."""

from __future__ import annotations

import time

import numpy as np
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QLabel, QWidget

from console.fleet.alerts import Severity
from console.fleet.columns import column
from console.fleet.model import Change, FleetModel, NodeRecord
from console.fleet.updates import LinkState
from gpufleet.v1.gpu_metrics import TEMP_GPU_C


def _hottest(nodes: list[NodeRecord]) -> float | None:
    """The highest GPU temperature of the nodes' newest ticks; None when none reported one."""
    temp = column(TEMP_GPU_C)
    newest = [rows[:, temp] for n in nodes if (rows := n.newest()) is not None]
    temps = np.concatenate(newest) if newest else np.empty(0, np.float32)
    temps = temps[~np.isnan(temps)]
    return float(temps.max()) if temps.size else None


def summary_text(fleet: FleetModel) -> str:
    nodes = fleet.nodes()
    connected = sum(n.state is LinkState.CONNECTED for n in nodes)
    lost = sum(s.health == "lost" for n in nodes for s in n.latest.values())
    parts = [f"{connected}/{len(nodes)} nodes connected", f"{fleet.gpu_total()} GPUs"]
    hottest = _hottest(nodes)
    if hottest is not None:
        parts.append(f"hottest {hottest:.0f} °C")
    if lost:
        parts.append(f"{lost} lost")
    active = list(fleet.alerts.active(int(time.time() * 1000)))
    for severity in (Severity.CRITICAL, Severity.WARNING):
        count = sum(a.severity is severity for a in active)
        if count:
            parts.append(f"{count} {severity.label}")
    return " · ".join(parts)


# The summary walks every GPU: twice a second is plenty for a status line.
REFRESH_MS = 500


class FleetSummary(QLabel):
    def __init__(self, fleet: FleetModel, parent: QWidget | None = None) -> None:
        super().__init__(summary_text(fleet), parent)
        self.setObjectName("fleetSummary")
        self._fleet = fleet
        self._timer = QTimer(self)
        self._timer.setObjectName("gpufleet-summary-timer")
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self._on_timer_timeout)

    def on_fleet_changed(self, _changes: dict[str, Change]) -> None:
        if not self._timer.isActive():
            self._timer.start(REFRESH_MS)

    def _on_timer_timeout(self) -> None:
        self.setText(summary_text(self._fleet))
