"""GpuPlots: live pyqtgraph plots of one GPU, one per metric the catalogue plots.

A plot per metric with a `Shown.plot_colour`, in catalogue order (utilisation,
memory, temperature, power), titled "Label (unit)"; its y axis fixed (`axis`),
ending at the GPU's capacity (`axis_limit`), or autoscaled.
Curves are created once; a refresh only calls setData on the ring's arrays.
NaN values (not available, or the daemon away) become gaps in the curves.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QWidget

from console.fleet.columns import PLOTTED, capacity, column, shown
from console.fleet.ring import SampleRing
from console.fleet.updates import GpuInfo
from gpufleet.v1.gpu_metrics import TEMP_GPU_C, GpuMetric, Limit

WINDOW_S = 600.0
BACKGROUND = "#1a1d23"
# Room above a capacity: power draw passes its limit for moments.
HEADROOM = {Limit.POWER_LIMIT: 1.05}


class GpuPlots(pg.GraphicsLayoutWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("gpuPlots")
        self.setBackground(BACKGROUND)
        self.curves: dict[GpuMetric[Any], pg.PlotDataItem] = {}
        self._plots: dict[GpuMetric[Any], pg.PlotItem] = {}
        # (curve, ring column) per plot: what a refresh reads, built once.
        self._columns: list[tuple[pg.PlotDataItem, int]] = []
        for row, metric in enumerate(PLOTTED):
            plot = self._add_plot(row, metric)
            # Width 1: a cosmetic pen draws without stroking, several times faster.
            self.curves[metric] = plot.plot(pen=pg.mkPen(shown(metric).plot_colour, width=1))
            self._columns.append((self.curves[metric], column(metric)))
            self._plots[metric] = plot

    def _add_plot(self, row: int, metric: GpuMetric[Any]) -> pg.PlotItem:
        plot = self.addPlot(row=row, col=0, axisItems={"bottom": pg.DateAxisItem()})
        how = shown(metric)
        plot.setTitle(f"{how.label} ({how.unit})", size="9pt")
        # No grid: axis grid lines were three quarters of the plots' repaint
        # (bench/console_fleet.py: frame p99 42 -> 26 ms at 1,000 GPUs).
        plot.showGrid(x=False, y=False)
        plot.setClipToView(True)
        plot.setDownsampling(mode="peak")
        plot.setMouseEnabled(x=False, y=True)
        plot.getAxis("left").setWidth(44)
        if self._plots:
            plot.setXLink(next(iter(self._plots.values())))
        if row < len(PLOTTED) - 1:
            plot.hideAxis("bottom")  # one shared time axis, under the last plot
        if how.axis is not None:
            plot.setYRange(*how.axis, padding=0.02)
        return plot

    def set_limits(self, gpu: GpuInfo) -> None:
        """End the capacity axes (memory, power) at this GPU's own capacity."""
        for metric, plot in self._plots.items():
            limit = shown(metric).axis_limit
            top = capacity(gpu, metric)
            if limit is not None and top:
                plot.setYRange(0, top * HEADROOM.get(limit, 1.0), padding=0.02)

    def show_series(self, ring: SampleRing | None, gpu: int) -> None:
        if ring is None or len(ring) == 0 or gpu >= ring.gpu_count:
            self.clear_series()
            return
        for curve, index in self._columns:
            times, values = ring.series(gpu, index)
            curve.setData(times, values, connect="finite")
        end = ring.last_time
        start = max(float(np.nanmin(ring.times())), end - WINDOW_S)
        last = next(reversed(self._plots.values()))
        last.setXRange(start, max(end, start + 1), padding=0)

    def point_count(self) -> int:
        """Finite points on the temperature curve: how much the plots show."""
        _, values = self.curves[TEMP_GPU_C].getOriginalDataset()
        return 0 if values is None else int(np.isfinite(values).sum())

    def clear_series(self) -> None:
        for curve in self.curves.values():
            curve.setData([], [])
