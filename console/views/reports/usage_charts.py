"""UsageCharts: GPU-hours per team, the top users, and reserved GPU time left idle.

Three pyqtgraph bar charts, drawn once per refresh (usage is a report, not a
live plot).
"""

from __future__ import annotations

from collections.abc import Sequence

import pyqtgraph as pg
from PySide6.QtWidgets import QHBoxLayout, QWidget

from console.fleet.usage import HOUR, UsageRow, top

TOP_COUNT = 8
# (title, value of a row, colour)
CHARTS = {
    "team": ("GPU-hours by team", "gpu_seconds", "#63b3ed"),
    "users": (f"Top {TOP_COUNT} users (GPU-hours)", "gpu_seconds", "#68d391"),
    "idle": ("Reserved but idle (hours)", "reserved_idle_seconds", "#f6ad55"),
}


class UsageCharts(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("usageCharts")
        self.plots: dict[str, pg.PlotWidget] = {}
        self.bars: dict[str, pg.BarGraphItem] = {}
        self.shown: dict[str, list[tuple[str, float]]] = {}  # chart -> (label, hours) drawn
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        for name, (title, _value, color) in CHARTS.items():
            plot = pg.PlotWidget(title=title)
            plot.setObjectName(f"usageChart_{name}")
            plot.setMouseEnabled(x=False, y=False)
            plot.hideButtons()
            plot.setMenuEnabled(False)
            bars = pg.BarGraphItem(x=[], height=[], width=0.6, brush=color)
            plot.addItem(bars)
            self.plots[name], self.bars[name] = plot, bars
            layout.addWidget(plot)

    def show_report(self, by_team: Sequence[UsageRow], by_user: Sequence[UsageRow]) -> None:
        self._draw("team", top(by_team, len(by_team)))
        self._draw("users", top(by_user, TOP_COUNT))
        self._draw("idle", top(by_user, TOP_COUNT, "reserved_idle_seconds"))

    def _draw(self, name: str, rows: Sequence[UsageRow]) -> None:
        value = CHARTS[name][1]
        shown = [(r.key, getattr(r, value) / HOUR) for r in rows]
        self.shown[name] = shown
        xs = list(range(len(shown)))
        self.bars[name].setOpts(x=xs, height=[h for _, h in shown], width=0.6)
        axis = self.plots[name].getAxis("bottom")
        axis.setTicks([[(x, label) for x, (label, _h) in zip(xs, shown, strict=True)]])
        self.plots[name].setXRange(-0.6, max(len(shown), 1) - 0.4, padding=0)
        self.plots[name].enableAutoRange(axis="y")
