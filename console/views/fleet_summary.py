"""FleetSummary: one line in the status bar about the whole fleet."""

from __future__ import annotations

import time

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QLabel, QWidget

from console.fleet.alerts import Severity
from console.fleet.model import Change, FleetModel
from console.fleet.updates import LinkState


def summary_text(fleet: FleetModel) -> str:
    nodes = fleet.nodes()
    connected = sum(n.state is LinkState.CONNECTED for n in nodes)
    snapshots = [s for n in nodes for s in n.latest.values()]
    temps = [s.temp_c for s in snapshots if s.temp_c is not None]
    lost = sum(s.health == "lost" for s in snapshots)
    parts = [f"{connected}/{len(nodes)} nodes connected", f"{fleet.gpu_total()} GPUs"]
    if temps:
        parts.append(f"hottest {max(temps):.0f} °C")
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
