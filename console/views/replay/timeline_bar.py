"""TimelineBar: the replay strip's track: its window, the alerts raised in it, the cursor.

Drag (or click) to move the cursor; with the keyboard ← → move it a step (Shift: ten),
Page Up / Page Down jump to the previous or next alert, Home to the window's start and
End back to live. The bar only says where the cursor went (`moved`); the strip decides.
"""

from __future__ import annotations

from PySide6.QtCore import QRect, QSize, Qt, Signal
from PySide6.QtGui import QColor, QKeyEvent, QMouseEvent, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

from console.fleet.timeline import Mark
from gpufleet.v1.alert_severity import Severity

STEPS = 120  # a window in cursor steps: 30 s of the last hour, 6 h of 30 days
BIG_STEP = 10
MARK_COLORS = {
    Severity.CRITICAL: QColor("#e53e3e"),
    Severity.WARNING: QColor("#dd9a1b"),
    Severity.INFO: QColor("#4299e1"),
}
TRACK = QColor("#4a5568")
CURSOR = QColor("#f6ad55")
LIVE = QColor("#48bb78")
MARGIN = 6


class TimelineBar(QWidget):
    moved = Signal(object)  # the cursor's new moment (Unix ms: past a C int)
    liveRequested = Signal()
    alertStep = Signal(int)  # -1: the previous alert's raise, +1: the next

    def __init__(self) -> None:
        super().__init__()
        self.setObjectName("replayTimeline")
        self.setAccessibleName("Replay timeline")
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setToolTip("Drag to show the fleet at a past moment; ← → step, Page Up/Down: "
                        "previous/next alert, End: live")  # fmt: skip
        self.start_ms, self.end_ms = 0, 1
        self.at_ms: int | None = None  # None: live (the cursor at the window's end)
        self.marks: list[Mark] = []

    def sizeHint(self) -> QSize:
        return QSize(400, 26)

    def set_span(self, start_ms: int, end_ms: int) -> None:
        self.start_ms, self.end_ms = start_ms, max(end_ms, start_ms + 1)
        self.update()

    def set_cursor(self, at_ms: int | None) -> None:
        self.at_ms = at_ms
        self.update()

    def set_marks(self, marks: list[Mark]) -> None:
        if marks != self.marks:
            self.marks = marks
            self.update()

    # -- geometry ------------------------------------------------------------------

    def _track(self) -> QRect:
        return self.rect().adjusted(MARGIN, 4, -MARGIN, -4)

    def x_of(self, at_ms: int) -> int:
        track = self._track()
        share = (at_ms - self.start_ms) / (self.end_ms - self.start_ms)
        return track.left() + round(max(0.0, min(1.0, share)) * track.width())

    def moment_at(self, x: float) -> int:
        track = self._track()
        share = (x - track.left()) / max(1, track.width())
        return self.start_ms + round(max(0.0, min(1.0, share)) * (self.end_ms - self.start_ms))

    # -- drawing -------------------------------------------------------------------

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        track = self._track()
        middle = track.center().y()
        painter.fillRect(QRect(track.left(), middle - 2, track.width(), 4), TRACK)
        for at_ms, severity in self.marks:  # alert density: one tick per raise
            painter.setPen(QPen(MARK_COLORS.get(severity, TRACK), 2))
            x = self.x_of(at_ms)
            painter.drawLine(x, track.top() + 2, x, track.bottom() - 2)
        live = self.at_ms is None
        x = self.x_of(self.end_ms if live else self.at_ms or self.end_ms)
        painter.setPen(QPen(LIVE if live else CURSOR, 3))
        painter.drawLine(x, track.top() - 2, x, track.bottom() + 2)
        if self.hasFocus():
            painter.setPen(QPen(self.palette().highlight().color(), 1, Qt.PenStyle.DotLine))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRect(self.rect().adjusted(0, 0, -1, -1))
        painter.end()

    # -- mouse and keys ------------------------------------------------------------

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            self.moved.emit(self.moment_at(event.position().x()))

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        if event.buttons() & Qt.MouseButton.LeftButton:
            self.moved.emit(self.moment_at(event.position().x()))

    def keyPressEvent(self, event: QKeyEvent) -> None:
        key, shift = event.key(), bool(event.modifiers() & Qt.KeyboardModifier.ShiftModifier)
        step = (self.end_ms - self.start_ms) // STEPS * (BIG_STEP if shift else 1)
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
        elif key in (Qt.Key.Key_PageUp, Qt.Key.Key_PageDown):
            self.alertStep.emit(-1 if key == Qt.Key.Key_PageUp else 1)
        else:
            super().keyPressEvent(event)
            return
        event.accept()
