"""Crosshair: a vertical line at the mouse's time across every plot, and what each curve read.

A mouse move only stores the position and starts a one-frame timer, so a
stream of moves costs one update per frame (20 Hz), not one per event.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pyqtgraph as pg
from PySide6.QtCore import QObject, QPointF

from console.qt.frame_pump import DEFAULT_FPS
from console.qt.named_timer import named_timer
from console.views.plots.plot_readout import CurveReading, readout_html

LINE_COLOUR = "#a0aec0"
FRAME_MS = round(1000 / DEFAULT_FPS)
OFFSET_PX = 14.0  # the label sits this far right of and below the cursor


class Crosshair(QObject):
    """The line in each plot and one label in the scene, refreshed at the frame rate."""

    def __init__(
        self,
        boxes: Sequence[pg.ViewBox],
        readings: Callable[[float], list[CurveReading]],
        span_s: Callable[[], float],
        parent: QObject | None = None,
    ) -> None:
        """`parent`: the plots' widget, so that the crosshair and its timer go with the
        plots (a move's timer firing after the window was deleted read deleted boxes)."""
        super().__init__(parent)
        self._boxes, self._readings, self._span_s = list(boxes), readings, span_s
        self.lines: list[pg.InfiniteLine] = []
        for box in self._boxes:
            line = pg.InfiniteLine(angle=90, movable=False, pen=pg.mkPen(LINE_COLOUR, width=1))
            line.setVisible(False)
            box.addItem(line, ignoreBounds=True)
            self.lines.append(line)
        self.label = pg.TextItem(anchor=(0, 0), fill=pg.mkBrush(20, 23, 30, 225))
        self.label.setZValue(1000)
        self.label.setVisible(False)
        self._boxes[0].scene().addItem(self.label)
        self._pending: QPointF | None = None
        self.time_s: float | None = None  # where the line is, or None while hidden
        self._timer = named_timer(
            self,
            "gpufleet-crosshair-timer",
            self.update_now,
            interval_ms=FRAME_MS,
            single_shot=True,
        )

    def on_mouse_moved(self, scene_pos: QPointF) -> None:
        self._pending = QPointF(scene_pos)
        if not self._timer.isActive():
            self._timer.start()

    def hide(self) -> None:
        self._pending = None
        self._timer.stop()
        self._show(None)

    def update_now(self) -> None:
        """Move the line to the stored position (the timer's job; tests call it too)."""
        pos, self._pending = self._pending, None
        box = next((b for b in self._boxes if pos and b.sceneBoundingRect().contains(pos)), None)
        if pos is None or box is None:
            self._show(None)
            return
        self._show(box.mapSceneToView(pos).x(), pos)

    def refresh(self) -> None:
        """New data under a resting mouse: re-read the values at the same time."""
        if self.time_s is not None:
            self.label.setHtml(
                readout_html(self.time_s, self._span_s(), self._readings(self.time_s))
            )

    def _show(self, t: float | None, pos: QPointF | None = None) -> None:
        self.time_s = t
        for line in self.lines:
            line.setVisible(t is not None)
            if t is not None:
                line.setPos(t)
        self.label.setVisible(t is not None)
        if t is None or pos is None:
            return
        self.refresh()
        self._place(pos)

    def _place(self, pos: QPointF) -> None:
        # Flip to the cursor's other side near the right or bottom edge: always whole in view.
        view = self.label.scene().views()[0]  # the scene's own rect spans every infinite line
        scene = view.mapToScene(view.viewport().rect()).boundingRect()
        size = self.label.textItem.boundingRect()  # in pixels: the label ignores zoom
        x = pos.x() + OFFSET_PX
        y = pos.y() + OFFSET_PX
        if x + size.width() > scene.right():
            x = pos.x() - OFFSET_PX - size.width()
        if y + size.height() > scene.bottom():
            y = max(scene.top(), pos.y() - OFFSET_PX - size.height())
        self.label.setPos(x, y)
