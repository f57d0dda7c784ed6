"""GpuPlots: live pyqtgraph plots of one GPU, one per metric the catalogue plots.

A plot per metric with a `Shown.plot_colour`, in catalogue order (utilisation,
memory, temperature, power), titled "Label (unit)"; its y axis fixed (`axis`),
ending at the GPU's capacity (`axis_limit`), or autoscaled to the visible time.
The time axis is shared and local; its range is the TimeWindow's: live (the
last N minutes up to the newest sample) or paused (a held range, left by a
zoom, a pan or Custom…). The wheel is the page's: it scrolls the panel around
the plots, as over any page; Ctrl+wheel zooms time around the cursor and a drag
pans it. Either pauses, and the range bar says so; a double click or Live
returns.
Curves are created once; a refresh only calls setData on the ring's arrays,
and none while paused (the view holds what it showed). NaN values (not
available, or the daemon away) become gaps in the curves.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QPoint, QPointF, Qt, Signal
from PySide6.QtGui import QMouseEvent, QWheelEvent
from PySide6.QtWidgets import QAbstractScrollArea, QApplication, QWidget

from console.fleet.columns import PLOTTED, capacity, column, shown
from console.fleet.history_range import HistorySlice, merge
from console.fleet.model import NodeRecord
from console.fleet.ring import SampleRing
from console.fleet.time_range import TimeWindow, coverage_note, ring_reach_s
from console.fleet.updates import GpuInfo
from console.views.common.theme import current as current_theme
from console.views.plots.plot_axes import SparseAxis, time_axis
from console.views.plots.plot_crosshair import Crosshair
from console.views.plots.plot_history import PlotHistory
from console.views.plots.plot_readout import CurveReading, value_at
from console.views.plots.plot_thresholds import PlotThresholds, thresholds
from console.views.plots.plot_viewbox import PlotViewBox
from gpufleet.v1.gpu_metrics import TEMP_GPU_C, GpuMetric, Limit

# The theme's (console/views/common/theme.py); a theme switch restyles the plots (theme_plots.py).
BACKGROUND = current_theme().plot_background
# The past moment the console shows (incident replay): a line in each plot, in a
# brighter tone of the replay banner's amber (the banner's own is dim on a dark plot).
MOMENT_COLOUR = "#dd8a1f"
# Room above a capacity: power draw passes its limit for moments.
HEADROOM = {Limit.POWER_LIMIT: 1.05}
# Each plot at least this high (title, curve, two y labels), the time axis on top
# of the last: a short panel scrolls (PlotPanel) rather than squeeze them.
MIN_PLOT_HEIGHT = 90
TIME_AXIS_HEIGHT = 30
SPACING = 4
NOTE_ROW = 0  # the layout's row of the source note, above the first plot (never over a curve)


class GpuPlots(pg.GraphicsLayoutWidget):
    windowChanged = Signal(object)  # the TimeWindow, after any change of range or Live
    menuRequested = Signal(QPoint)  # a right click on a plot, at this global position

    def __init__(
        self, parent: QWidget | None = None, clock: Callable[[], float] = time.time
    ) -> None:
        super().__init__(parent)
        self.setObjectName("gpuPlots")
        self.setBackground(current_theme().plot_background)
        self._clock = clock
        self.window = TimeWindow()
        self.curves: dict[GpuMetric[Any], pg.PlotDataItem] = {}
        # Fetched history's peak within each step: a thin faint line above the mean.
        self.peaks: dict[GpuMetric[Any], pg.PlotDataItem] = {}
        self._plots: dict[GpuMetric[Any], pg.PlotItem] = {}
        self._thresholds: dict[GpuMetric[Any], PlotThresholds] = {}
        # (metric, curve, peak curve, ring column) per plot: what a refresh reads, built once.
        self._columns: list[tuple[GpuMetric[Any], pg.PlotDataItem, pg.PlotDataItem, int]] = []
        self.history: PlotHistory | None = None  # older data and the node's lines; None: ring only
        self.history_note: str | None = None  # where the older part came from, as last drawn
        self.ci.layout.setSpacing(SPACING)
        self.ci.setContentsMargins(SPACING, SPACING, SPACING, SPACING)
        # The note's own row above the plots: where the older part came from, or what the
        # console cannot reach. Hidden (no room taken) while there is nothing to say.
        self._note_row = pg.GraphicsWidget()
        self._note_row.setVisible(False)
        self.ci.addItem(self._note_row, row=NOTE_ROW, col=0)
        for row, metric in enumerate(PLOTTED):
            plot = self._add_plot(row, metric)
            # Width 1: a cosmetic pen draws without stroking, several times faster.
            colour = shown(metric).plot_colour
            # The peak: a faint thin line, not a filled band: a band's polygon fill costs
            # paint time every frame and hides the threshold lines beneath it.
            faint = pg.mkColor(colour)
            faint.setAlpha(90)
            self.peaks[metric] = plot.plot(pen=pg.mkPen(faint, width=1))
            self.curves[metric] = plot.plot(pen=pg.mkPen(colour, width=1))
            self._columns.append((metric, self.curves[metric], self.peaks[metric], column(metric)))
            self._plots[metric] = plot
            self._thresholds[metric] = PlotThresholds(plot, metric)
            self._thresholds[metric].show(thresholds(metric))
        self._plots_height = (
            len(PLOTTED) * (MIN_PLOT_HEIGHT + SPACING) + TIME_AXIS_HEIGHT + 2 * SPACING
        )
        self.setMinimumHeight(self._plots_height)
        boxes = [plot.getViewBox() for plot in self._plots.values()]
        self._boxes = boxes
        self.note = pg.TextItem(color="#e2e8f0", fill=pg.mkBrush(45, 55, 72, 220), anchor=(0, 0))
        self.note.setParentItem(self._note_row)  # level with the plots' left axes
        self.note.setVisible(False)
        self._note_shown: str | None = None  # the note's text as laid out (None: no note row)
        self.crosshair = Crosshair(boxes, self._readings, self._span_s, parent=self)
        for box in boxes:
            box.sigRangeChangedManually.connect(
                lambda mask, b=box: self._on_box_range_changed_manually(b, mask)
            )
            box.menuRequested.connect(self.menuRequested)
        self.scene().sigMouseMoved.connect(self.crosshair.on_mouse_moved)
        self._ring: SampleRing | None = None  # what show_series was last given
        self._gpu = 0
        # What the curves hold, drawn from: the ring, the GPU, the fetched slice, the ring's
        # newest tick if the range showed the ring (_holds).
        self._drawn_from: tuple[SampleRing, int, HistorySlice | None, float | None] | None = None
        self._newest = math.nan
        self._reach_s = math.inf
        self.moment_lines = [self._moment_line(plot) for plot in self._plots.values()]
        self._apply_range()

    @staticmethod
    def _moment_line(plot: pg.PlotItem) -> pg.InfiniteLine:
        line = pg.InfiniteLine(angle=90, movable=False, pen=pg.mkPen(MOMENT_COLOUR, width=1))
        line.setVisible(False)
        plot.addItem(line, ignoreBounds=True)
        return line

    def _add_plot(self, row: int, metric: GpuMetric[Any]) -> pg.PlotItem:
        last = row == len(PLOTTED) - 1
        plot = self.addPlot(
            row=NOTE_ROW + 1 + row, col=0, viewBox=PlotViewBox(),
            axisItems={"bottom": time_axis(), "left": SparseAxis()},
        )  # fmt: skip
        how = shown(metric)
        plot.setTitle(f"{how.label} ({how.unit})", size="9pt")
        plot.setMenuEnabled(False)
        plot.hideButtons()  # the "A" autoscale button: the time range is the range bar's
        for hidden in ("top", "right"):
            # Never shown, yet linked to the view: without this each range step
            # re-set their labels' HTML to work out an SI prefix.
            plot.getAxis(hidden).enableAutoSIPrefix(False)
        # No grid: axis grid lines were three quarters of the plots' repaint
        # (bench/console_fleet.py: frame p99 42 -> 26 ms at 1,000 GPUs).
        plot.showGrid(x=False, y=False)
        # No clip to view: what a curve is given is already the visible range (the
        # ring, at most 1,024 samples, and history fetched for the range), and
        # clipping made every range step recompute each curve a second time.
        plot.setMinimumHeight(MIN_PLOT_HEIGHT + (TIME_AXIS_HEIGHT if last else 0))
        if self._plots:
            plot.setXLink(next(iter(self._plots.values())))
        if not last:
            plot.hideAxis("bottom")  # one shared time axis, under the last plot
        if how.axis is not None:
            plot.setYRange(*how.axis, padding=0.02)
        else:
            plot.enableAutoRange(axis="y")
            plot.setAutoVisible(y=True)  # scale to what the visible time holds
        return plot

    @property
    def threshold_lines(self) -> dict[GpuMetric[Any], list[pg.InfiniteLine]]:
        """The alert lines drawn now, by plot (only plots that have some)."""
        return {m: t.lines for m, t in self._thresholds.items() if t.lines}

    def use_history(self, history: PlotHistory) -> None:
        """Draw ranges older than the ring from `history`, and the node's own alert lines."""
        self.history = history
        history.arrived.connect(self._on_history_arrived)

    def _on_history_arrived(self) -> None:
        self._draw()

    def _show_thresholds(self, node: NodeRecord | None) -> None:
        lines = node.info.alert_thresholds if node is not None and node.info else ()
        for metric, drawn in self._thresholds.items():
            drawn.show(thresholds(metric, lines))

    def set_limits(self, gpu: GpuInfo) -> None:
        """End the capacity axes (memory, power) at this GPU's own capacity."""
        for metric, plot in self._plots.items():
            limit = shown(metric).axis_limit
            top = capacity(gpu, metric)
            if limit is not None and top:
                plot.setYRange(0, top * HEADROOM.get(limit, 1.0), padding=0.02)

    def show_series(self, ring: SampleRing | None, gpu: int) -> None:
        """A frame's update: redraw from the ring while live (a paused view holds its data)."""
        self._ring, self._gpu = ring, gpu
        drawn = self._drawn_from
        if self.window.live or drawn is None or drawn[0] is not ring or drawn[1] != gpu:
            self._draw()

    def _draw(self) -> None:
        ring, gpu = self._ring, self._gpu
        if ring is None or len(ring) == 0 or gpu >= ring.gpu_count:
            self.clear_series()
        else:
            self._newest = ring.last_time
            older = self._older(ring, gpu)
            if not self._holds(ring, gpu, older):
                for metric, curve, peak, index in self._columns:
                    times, values = ring.series(gpu, index)
                    drawn = merge(older, metric.field, times, values)
                    curve.setData(drawn.times, drawn.values, connect="finite")
                    peak.setData(drawn.peak_times, drawn.peak_values, connect="finite")
                self._reach_s = ring_reach_s(ring.capacity, times[0], times[-1], len(times))
                self._drawn_from = (ring, gpu, older, self._ring_seen(ring))
        self._apply_range()
        self.crosshair.refresh()

    def _ring_seen(self, ring: SampleRing) -> float | None:
        """The ring's newest tick where the visible range reaches the ring (None: it does
        not, and what the ring gains is not seen)."""
        return ring.last_time if self.visible_range()[1] >= ring.first_time else None

    def _holds(self, ring: SampleRing, gpu: int, older: HistorySlice | None) -> bool:
        """Whether the curves already hold what they would be given: the same fetched slice
        and nothing new in the ring that the range shows. A past moment's plots moved
        along (Play) then only move their range: a new setData rebuilt every curve's path
        (the replay's longest frames, bench/replay_fleet.py)."""
        drawn = self._drawn_from
        return (
            drawn is not None and drawn[0] is ring and drawn[1] == gpu and drawn[2] is older
            and drawn[3] == self._ring_seen(ring)
        )  # fmt: skip

    def _older(self, ring: SampleRing, gpu: int) -> HistorySlice | None:
        """The fetched slice before the ring for the visible range (asked for if missing)."""
        if self.history is None:
            return None
        self._show_thresholds(self.history.node_of(ring))
        start, end = self.visible_range()
        older, self.history_note = self.history.slice_for(ring, gpu, start, end)
        return older

    def _now(self) -> float:
        return self._newest if math.isfinite(self._newest) else self._clock()

    def _span_s(self) -> float:
        start, end = self.visible_range()
        return end - start

    def visible_range(self) -> tuple[float, float]:
        """The time range the plots show now (epoch seconds)."""
        start, end = self.window.visible(self._now())
        return start, end

    def _apply_range(self) -> None:
        start, end = self.visible_range()
        next(reversed(self._plots.values())).setXRange(start, end, padding=0)
        for box in self._boxes:
            # What each box would do when the view paints (autoscale, its transform):
            # done there, it changes the scene mid-paint and the whole view paints a
            # second time; done now, a refresh paints once.
            box.prepareForPaint()
        self._show_note(start)

    def _show_note(self, start: float) -> None:
        note = self.history_note or coverage_note(start, self._now(), self._reach_s)
        if note == self._note_shown:
            return  # most frames: nothing changed, nothing to lay out
        self._note_shown = note
        self.note.setVisible(note is not None)
        self._note_row.setVisible(note is not None)
        extra = 0
        if note is not None:
            self.note.setText(note)
            extra = math.ceil(self.note.textItem.boundingRect().height())
            self._note_row.setMinimumHeight(extra)
            self._note_row.setMaximumHeight(extra)
            extra += SPACING
        # The plots keep their least height under the note: the panel scrolls instead.
        self.setMinimumHeight(self._plots_height + extra)

    # The range bar's and the menu's requests ------------------------------------------

    def choose_span(self, span_s: float) -> None:
        self.window.choose_span(span_s)
        self._changed()

    def choose_custom(self, start_s: float, end_s: float) -> None:
        self.window.choose_custom(start_s, end_s)
        self._changed()

    def set_live(self, live: bool) -> None:
        if live:
            self.window.go_live()
        else:
            self.window.pause(self._now())
        self._changed()

    def reset_zoom(self) -> None:
        self.window.reset_zoom()
        self._changed()

    def show_moment(self, at_s: float | None) -> None:
        """Incident replay: hold the range around the past moment `at_s`, marked by a line
        in each plot; None (live again) puts the range back as it was before."""
        if at_s is None:
            self.window.leave_moment()
        else:
            self.window.show_moment(at_s)
        for line in self.moment_lines:
            line.setVisible(at_s is not None)
            if at_s is not None:
                line.setValue(at_s)
        self._changed()

    def _changed(self) -> None:
        # A range chosen by hand reads the ring afresh, paused or not.
        self._draw()
        self.windowChanged.emit(self.window)

    def _on_box_range_changed_manually(self, box: pg.ViewBox, mask: list[bool]) -> None:
        if not mask[0]:
            return
        start, end = box.viewRange()[0]
        self.window.move_by_hand(float(start), float(end))
        if self.history is not None:
            self._draw()  # the range moved: older data may be needed (or be held already)
        else:
            self._show_note(float(start))
        self.windowChanged.emit(self.window)

    # Reading the plots ----------------------------------------------------------------

    def _readings(self, t: float) -> list[CurveReading]:
        found = []
        for metric, curve in self.curves.items():
            times, values = curve.getOriginalDataset()
            value = None if times is None or values is None else value_at(times, values, t)
            how = shown(metric)
            found.append(CurveReading(how.label, how.unit, how.plot_colour or "#ffffff", value))
        return found

    def plot_item(self, metric: GpuMetric[Any]) -> pg.PlotItem:
        return self._plots[metric]

    def point_count(self) -> int:
        """Finite points on the temperature curve: how much the plots show."""
        _, values = self.curves[TEMP_GPU_C].getOriginalDataset()
        return 0 if values is None else int(np.isfinite(values).sum())

    def clear_series(self) -> None:
        self._drawn_from = None
        for curve in (*self.curves.values(), *self.peaks.values()):
            curve.setData([], [])
        self._newest, self._reach_s = math.nan, math.inf
        self.history_note = None

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:
        # Here, not in the ViewBox: with Qt 6's press-then-double-click sequence
        # pyqtgraph hands a box its double click only at the next release.
        super().mouseDoubleClickEvent(event)
        at = self.mapToScene(event.position().toPoint())
        if event.button() == Qt.MouseButton.LeftButton and any(
            box.sceneBoundingRect().contains(at) for box in self._boxes
        ):
            self.reset_zoom()

    def wheelEvent(self, event: QWheelEvent) -> None:
        """Ctrl+wheel zooms time; the plain wheel scrolls the page, as over any page.

        A zoom pauses the live view: never to be done by a scroll meant for the panel.
        The plain wheel goes to the scroll areas around the plots, nearest first, until
        one moves (PlotPanel's, then the detail's): what Qt's own propagation does for
        a real wheel, done here so that every wheel event, sent or real, takes that way.
        """
        if event.modifiers() & Qt.KeyboardModifier.ControlModifier:
            super().wheelEvent(event)
            return
        event.ignore()
        at = event.position().toPoint()
        area = self.parentWidget()
        while area is not None:
            if isinstance(area, QAbstractScrollArea):
                page = area.viewport()
                passed = QWheelEvent(
                    QPointF(self.viewport().mapTo(page, at)), event.globalPosition(),
                    event.pixelDelta(), event.angleDelta(), event.buttons(), event.modifiers(),
                    event.phase(), event.inverted(), event.source(),
                )  # fmt: skip
                QApplication.sendEvent(page, passed)
                if passed.isAccepted():
                    event.accept()
                    return
            area = area.parentWidget()

    def leaveEvent(self, event: QEvent) -> None:
        self.crosshair.hide()
        super().leaveEvent(event)
