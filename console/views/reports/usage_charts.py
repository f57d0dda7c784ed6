"""UsageCharts: GPU-hours per team, the top users, and reserved GPU time left idle.

Three pyqtgraph bar charts, drawn once per refresh (usage is a report, not a
live plot). The bars lie down, the biggest on top: a name a row on the left axis
never runs into the next, however narrow the chart (upright, eight users' names
ran together in a 1366x768 window).
"""

from __future__ import annotations

from collections.abc import Sequence

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QHBoxLayout, QLabel, QVBoxLayout, QWidget

from console.fleet.usage import HOUR, UsageRow, top

TOP_COUNT = 8
NAME_ROOM = 16  # px beside the longest name on a chart's axis: the tick and its gap
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
        self.titles: dict[str, QLabel] = {}
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        for name, (title, _value, color) in CHARTS.items():
            plot = pg.PlotWidget()
            plot.setObjectName(f"usageChart_{name}")
            plot.setMouseEnabled(x=False, y=False)
            plot.hideButtons()
            plot.setMenuEnabled(False)
            bars = pg.BarGraphItem(x0=[], y=[], width=[], height=0.6, brush=color)
            plot.addItem(bars)
            # The title a label above the chart, wrapping where narrow: pyqtgraph's own asks
            # its text's width, and three beside the usage table made every chart wider than
            # its room, cut off at the right.
            label = QLabel(title)
            label.setObjectName(f"usageChartTitle_{name}")
            label.setWordWrap(True)
            label.setAlignment(Qt.AlignmentFlag.AlignHCenter)
            column = QVBoxLayout()
            column.addWidget(label)
            column.addWidget(plot, 1)
            layout.addLayout(column, 1)
            self.plots[name], self.bars[name], self.titles[name] = plot, bars, label

    def show_report(self, by_team: Sequence[UsageRow], by_user: Sequence[UsageRow]) -> None:
        self._draw("team", top(by_team, len(by_team)))
        self._draw("users", top(by_user, TOP_COUNT))
        self._draw("idle", top(by_user, TOP_COUNT, "reserved_idle_seconds"))

    def _draw(self, name: str, rows: Sequence[UsageRow]) -> None:
        value = CHARTS[name][1]
        shown = [(r.key, getattr(r, value) / HOUR) for r in rows]
        self.shown[name] = shown
        rows_up = list(range(len(shown) - 1, -1, -1))  # the first (biggest) on top
        self.bars[name].setOpts(x0=[0] * len(shown), y=rows_up, width=[h for _, h in shown],
                                height=0.6)  # fmt: skip
        axis = self.plots[name].getAxis("left")
        axis.setTicks([[(y, label) for y, (label, _h) in zip(rows_up, shown, strict=True)]])
        # As wide as the longest name (pyqtgraph leaves out a label wider than its axis).
        names = QFontMetrics(axis.style.get("tickFont") or self.font())
        widest = max((names.horizontalAdvance(label) for label, _h in shown), default=0)
        axis.setWidth(widest + NAME_ROOM)
        self.plots[name].setYRange(-0.6, max(len(shown), 1) - 0.4, padding=0)
        longest = max((h for _, h in shown), default=0.0)
        self.plots[name].setXRange(0, longest * 1.05 if longest > 0 else 1, padding=0)
