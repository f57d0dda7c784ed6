"""PlotViewBox: a pyqtgraph ViewBox that zooms and pans time only, with our own menu.

pyqtgraph's own menu offers "X axis: min/max" in raw epoch seconds and
options that fight the console's axes; this box asks its owner for a menu
instead (right click). A wheel event that reaches it zooms x around the cursor
(GpuPlots lets only Ctrl+wheel through: the plain wheel scrolls the page) and a
drag pans x (y is the plot's: fixed or autoscaled).
"""

from __future__ import annotations

from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import QPoint, Qt, Signal

from console.fleet.time_range import MAX_SPAN_S, MIN_SPAN_S


class PlotViewBox(pg.ViewBox):
    menuRequested = Signal(QPoint)  # global position of the right click

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(enableMenu=False, **kwargs)
        self.setMouseEnabled(x=True, y=False)
        self.setLimits(minXRange=MIN_SPAN_S, maxXRange=MAX_SPAN_S)

    def mouseClickEvent(self, ev: Any) -> None:
        if ev.button() == Qt.MouseButton.RightButton:
            ev.accept()
            self.menuRequested.emit(ev.screenPos().toPoint())
        else:
            super().mouseClickEvent(ev)
