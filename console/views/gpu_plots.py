"""GpuPlots: live pyqtgraph plots of one GPU's utilisation, memory, temperature, power.

Curves are created once; a refresh only calls setData on the ring's arrays.
NaN values (not available, or the daemon away) become gaps in the curves.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QWidget

from console.fleet.metrics import Metric
from console.fleet.ring import SampleRing

WINDOW_S = 600.0
BACKGROUND = "#1a1d23"
PLOTS = (
    (Metric.UTIL_GPU, "Utilisation", "%", "#63b3ed"),
    (Metric.MEM_USED_GIB, "Memory used", "GiB", "#b794f4"),
    (Metric.TEMP_GPU, "Temperature", "°C", "#f6ad55"),
    (Metric.POWER_W, "Power", "W", "#68d391"),
)


class GpuPlots(pg.GraphicsLayoutWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("gpuPlots")
        self.setBackground(BACKGROUND)
        self.curves: dict[Metric, pg.PlotDataItem] = {}
        self._plots: list[pg.PlotItem] = []
        for row, (metric, title, unit, color) in enumerate(PLOTS):
            plot = self.addPlot(row=row, col=0, axisItems={"bottom": pg.DateAxisItem()})
            plot.setTitle(f"{title} ({unit})", size="9pt")
            # No grid: axis grid lines were three quarters of the plots' repaint
            # (bench/console_fleet.py: frame p99 42 -> 26 ms at 1,000 GPUs).
            plot.showGrid(x=False, y=False)
            plot.setClipToView(True)
            plot.setDownsampling(mode="peak")
            plot.setMouseEnabled(x=False, y=True)
            plot.getAxis("left").setWidth(44)
            if self._plots:
                plot.setXLink(self._plots[0])
            if row < len(PLOTS) - 1:
                plot.hideAxis("bottom")  # one shared time axis, under the last plot
            # Width 1: a cosmetic pen draws without stroking, several times faster.
            self.curves[metric] = plot.plot(pen=pg.mkPen(color, width=1))
            self._plots.append(plot)
        self._set_fixed_ranges()

    def _set_fixed_ranges(self) -> None:
        self._plots[0].setYRange(0, 100, padding=0.02)

    def set_limits(self, memory_total_gib: float | None, power_limit_w: float | None) -> None:
        """Scale the memory and power axes to the GPU's capacity."""
        if memory_total_gib:
            self._plots[1].setYRange(0, memory_total_gib, padding=0.02)
        if power_limit_w:
            self._plots[3].setYRange(0, power_limit_w * 1.05, padding=0.02)

    def show_series(self, ring: SampleRing | None, gpu: int) -> None:
        if ring is None or len(ring) == 0 or gpu >= ring.gpu_count:
            self.clear_series()
            return
        for metric, curve in self.curves.items():
            times, values = ring.series(gpu, metric)
            curve.setData(times, values, connect="finite")
        end = ring.last_time
        start = max(float(np.nanmin(ring.times())), end - WINDOW_S)
        self._plots[-1].setXRange(start, max(end, start + 1), padding=0)

    def point_count(self) -> int:
        """Finite points on the temperature curve: how much the plots show."""
        _, values = self.curves[Metric.TEMP_GPU].getOriginalDataset()
        return 0 if values is None else int(np.isfinite(values).sum())

    def clear_series(self) -> None:
        for curve in self.curves.values():
            curve.setData([], [])
