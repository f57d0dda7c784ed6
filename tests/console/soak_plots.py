"""Repaint 64+ pyqtgraph curves for a while; run as a script by test_plot_soak.py.

PySide6 6.12.0 on CPython 3.11 aborted the interpreter (none_dealloc) in
exactly this workload; the pinned PySide6 must survive it.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QApplication


def main(curves: int, points: int, frames: int) -> int:
    app = QApplication.instance() or QApplication([])
    widget = pg.GraphicsLayoutWidget()
    widget.resize(1600, 1200)
    items = []
    for i in range(curves):
        plot = widget.addPlot(row=i // 8, col=i % 8)
        plot.setClipToView(True)
        plot.setDownsampling(mode="peak")
        items.append(plot.plot(pen=pg.mkPen("c")))
    widget.show()
    x = np.arange(points, dtype=np.float64)
    rng = np.random.default_rng(0)
    for frame in range(frames):
        for curve in items:
            y = rng.normal(size=points)
            y[frame % points] = np.nan  # gaps, as the console draws them
            curve.setData(x, y, connect="finite")
        widget.grab()  # a real repaint of every curve
        app.processEvents()
    print(f"soak ok: {curves} curves x {points} points x {frames} frames")
    return 0


if __name__ == "__main__":
    sys.exit(main(*(int(a) for a in sys.argv[1:4])))
