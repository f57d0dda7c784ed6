"""TimelineBar: the replay strip's track: its window, the alerts raised in it, the node
outages and actions in it, the cursor.

Drag (or click) to move the cursor; with the keyboard ← → move it a step (one sample of
the tier the last answer came from where the window is short enough; Shift: ten), Page
Up / Page Down jump to the previous or next alert, Home to the window's start, End back
to live, Space plays or pauses. The bar only says what was asked (`moved`,
`playToggled`); the strip decides. A pointer over a mark shows what it marks.

The track and its marks are drawn once into a pixmap, again only when the window, the
marks or the size change: a month of a large fleet is thousands of marks, and Play moves
the cursor every frame (each move repaints only the cursor's old and new place).
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QPoint, QRect, QSize, Qt, Signal
from PySide6.QtGui import (
    QColor,
    QHelpEvent,
    QKeyEvent,
    QMouseEvent,
    QPainter,
    QPaintEvent,
    QPen,
    QPixmap,
    QPolygon,
    QResizeEvent,
)
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from console.fleet.timeline import EventMark, Mark, cursor_step, marks_near
from gpufleet.v1.alert_severity import Severity

BIG_STEP = 10
MARK_COLORS = {
    Severity.CRITICAL: QColor("#e53e3e"),
    Severity.WARNING: QColor("#dd9a1b"),
    Severity.INFO: QColor("#4299e1"),
}
# An outage or action's mark by its group (EventMark.group): colour, shape, and whether
# it stands over the track (what people and self-healing did) or under it (what failed).
EVENT_STYLE: dict[str, tuple[QColor, str, bool]] = {
    "outage": (QColor("#9f7aea"), "▼", False),
    "gpu": (QColor("#d53f8c"), "■", False),
    "person": (QColor("#38b2ac"), "●", True),
    "drain": (QColor("#ecc94b"), "◆", True),
    "kill": (QColor("#e2e8f0"), "✕", True),
    "healing": (QColor("#f687b3"), "▲", True),
}
LEGEND = (
    "Ticks: alerts raised (red critical, amber warning, blue info). Under the "
    "track: ▼ a node not responding, answering again or its daemon started; "
    "■ a GPU lost or recovered. Over it: ● acknowledged or silenced; ◆ drained "
    "or returned; ✕ a process killed; ▲ self-healing. Point at a mark to read it."
)
HINT = ("Drag to show the fleet at a past moment; ← → step a sample, Page Up/Down: "
        "previous/next alert, Space: play or pause, End: live")  # fmt: skip
NEAR_PX = 4  # a pointer this close to a mark points at it
SHAPE = 3  # half a mark's size (px)
TRACK = QColor("#4a5568")
CURSOR = QColor("#f6ad55")
LIVE = QColor("#48bb78")
MARGIN = 6
CURSOR_HALF = 3  # the cursor's line is 3 px wide: a move repaints this far either side


class TimelineBar(QWidget):
    moved = Signal(object)  # the cursor's new moment (Unix ms: past a C int)
    liveRequested = Signal()
    alertStep = Signal(int)  # -1: the previous alert's raise, +1: the next
    playToggled = Signal()

    def __init__(self) -> None:
        super().__init__()
        self.setObjectName("replayTimeline")
        self.setAccessibleName("Replay timeline")
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setToolTip(f"{HINT}\n{LEGEND}")
        self.start_ms, self.end_ms = 0, 1
        self.at_ms: int | None = None  # None: live (the cursor at the window's end)
        self.marks: list[Mark] = []
        self.events: list[EventMark] = []
        self.sample_step_ms: int | None = None  # the last answer's tier step (ms)
        self._drawn_marks: QPixmap | None = None  # the track and marks (None: draw again)

    def sizeHint(self) -> QSize:
        return QSize(400, 30)

    def set_span(self, start_ms: int, end_ms: int) -> None:
        span = (start_ms, max(end_ms, start_ms + 1))
        if span != (self.start_ms, self.end_ms):
            self.start_ms, self.end_ms = span
            self._redraw_marks()

    def set_cursor(self, at_ms: int | None) -> None:
        if at_ms == self.at_ms:
            return
        self.update(self._cursor_rect())
        self.at_ms = at_ms
        self.update(self._cursor_rect())

    def set_marks(self, marks: list[Mark], events: list[EventMark]) -> None:
        if marks != self.marks or events != self.events:
            self.marks, self.events = marks, events
            self._redraw_marks()

    def _redraw_marks(self) -> None:
        self._drawn_marks = None
        self.update()

    @property
    def step_ms(self) -> int:
        """One step of the cursor: a sample where the window is short enough."""
        return cursor_step(self.end_ms - self.start_ms, self.sample_step_ms)

    def tooltip_at(self, x: float) -> str:
        """What the marks under the pointer say, else the hint and the legend."""
        within = round(NEAR_PX * (self.end_ms - self.start_ms) / max(1, self._track().width()))
        near = marks_near(self.events, self.moment_at(x), within)
        return "\n".join(m.text for m in near) if near else self.toolTip()

    # -- geometry ------------------------------------------------------------------

    def _track(self) -> QRect:
        return self.rect().adjusted(MARGIN, 4, -MARGIN, -4)

    def x_of(self, at_ms: int) -> int:
        track = self._track()
        share = (at_ms - self.start_ms) / (self.end_ms - self.start_ms)
        return track.left() + round(max(0.0, min(1.0, share)) * track.width())

    def cursor_x(self) -> int:
        """Where the cursor stands: at the moment shown, or at the window's end (live)."""
        return self.x_of(self.end_ms if self.at_ms is None else self.at_ms)

    def _cursor_rect(self) -> QRect:
        return QRect(self.cursor_x() - CURSOR_HALF, 0, 2 * CURSOR_HALF + 1, self.height())

    def moment_at(self, x: float) -> int:
        track = self._track()
        share = (x - track.left()) / max(1, track.width())
        return self.start_ms + round(max(0.0, min(1.0, share)) * (self.end_ms - self.start_ms))

    # -- drawing -------------------------------------------------------------------

    def resizeEvent(self, event: QResizeEvent) -> None:
        self._drawn_marks = None
        super().resizeEvent(event)

    def paintEvent(self, event: QPaintEvent) -> None:
        if self._drawn_marks is None or self._drawn_marks.devicePixelRatio() != (
            self.devicePixelRatioF()
        ):
            self._drawn_marks = self._draw_marks()
        painter = QPainter(self)
        painter.drawPixmap(0, 0, self._drawn_marks)
        track = self._track()
        x = self.cursor_x()
        painter.setPen(QPen(LIVE if self.at_ms is None else CURSOR, 3))
        painter.drawLine(x, track.top() - 2, x, track.bottom() + 2)
        if self.hasFocus():
            painter.setPen(QPen(self.palette().highlight().color(), 1, Qt.PenStyle.DotLine))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRect(self.rect().adjusted(0, 0, -1, -1))
        painter.end()

    def _draw_marks(self) -> QPixmap:
        """The track, the alert ticks and the event marks, at the screen's pixel ratio."""
        ratio = self.devicePixelRatioF()
        pixmap = QPixmap(self.size() * ratio)
        pixmap.setDevicePixelRatio(ratio)
        pixmap.fill(Qt.GlobalColor.transparent)
        painter = QPainter(pixmap)
        track = self._track()
        middle = track.center().y()
        painter.fillRect(QRect(track.left(), middle - 2, track.width(), 4), TRACK)
        for at_ms, severity in self.marks:  # alert density: one tick per raise
            painter.setPen(QPen(MARK_COLORS.get(severity, TRACK), 2))
            x = self.x_of(at_ms)
            painter.drawLine(x, track.top() + 2, x, track.bottom() - 2)
        painter.setPen(Qt.PenStyle.NoPen)
        for mark in self.events:
            color, shape, over = EVENT_STYLE[mark.group]
            y = track.top() + SHAPE if over else track.bottom() - SHAPE
            _draw_shape(painter, shape, color, QPoint(self.x_of(mark.at_ms), y))
        painter.end()
        return pixmap

    # -- mouse and keys ------------------------------------------------------------

    def event(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ToolTip and isinstance(event, QHelpEvent):
            QToolTip.showText(event.globalPos(), self.tooltip_at(event.pos().x()), self)
            return True
        return super().event(event)

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            self.moved.emit(self.moment_at(event.position().x()))

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        if event.buttons() & Qt.MouseButton.LeftButton:
            self.moved.emit(self.moment_at(event.position().x()))

    def keyPressEvent(self, event: QKeyEvent) -> None:
        key, shift = event.key(), bool(event.modifiers() & Qt.KeyboardModifier.ShiftModifier)
        step = self.step_ms * (BIG_STEP if shift else 1)
        at = self.at_ms if self.at_ms is not None else self.end_ms
        if key == Qt.Key.Key_Left:
            self.moved.emit(max(self.start_ms, at - step))
        elif key == Qt.Key.Key_Right:
            if self.at_ms is not None and at + step >= self.end_ms:
                self.liveRequested.emit()  # past the window's end: now
            elif self.at_ms is not None:
                self.moved.emit(at + step)
        elif key == Qt.Key.Key_Home:
            self.moved.emit(self.start_ms)
        elif key == Qt.Key.Key_End:
            self.liveRequested.emit()
        elif key == Qt.Key.Key_Space:
            self.playToggled.emit()
        elif key in (Qt.Key.Key_PageUp, Qt.Key.Key_PageDown):
            self.alertStep.emit(-1 if key == Qt.Key.Key_PageUp else 1)
        else:
            super().keyPressEvent(event)
            return
        event.accept()


def _draw_shape(painter: QPainter, shape: str, color: QColor, at: QPoint) -> None:
    """One of EVENT_STYLE's shapes, 2 * SHAPE px across, centred on `at`."""
    x, y, r = at.x(), at.y(), SHAPE
    if shape == "✕":
        painter.setPen(QPen(color, 2))
        painter.drawLine(x - r, y - r, x + r, y + r)
        painter.drawLine(x - r, y + r, x + r, y - r)
        painter.setPen(Qt.PenStyle.NoPen)
        return
    painter.setBrush(color)
    if shape == "●":
        painter.drawEllipse(at, r, r)
    elif shape == "■":
        painter.drawRect(x - r, y - r, 2 * r, 2 * r)
    else:
        points = {
            "▼": [(x - r, y - r), (x + r, y - r), (x, y + r)],
            "▲": [(x - r, y + r), (x + r, y + r), (x, y - r)],
            "◆": [(x, y - r), (x + r, y), (x, y + r), (x - r, y)],
        }[shape]
        painter.drawPolygon(QPolygon([QPoint(px, py) for px, py in points]))
