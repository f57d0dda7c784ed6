"""Toast: an in-window popup: an alert (click: open the GPU) or a notice.

It sits in the top-right corner of its anchor (the window sets the fleet grid's
scroll area): over tiles, never over a table's rows. At the window's bottom right
it covered the last rows of the alert and process tables, where people look.
"""

from __future__ import annotations

from PySide6.QtCore import QPoint, QTimer, Signal
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import QFrame, QLabel, QVBoxLayout, QWidget

from console.fleet.alert_rows import AlertRow, Severity

SHOW_MS = 8000
MARGIN = 16


class Toast(QFrame):
    """One toast at a time: a newer alert replaces the text. Critical ones stay until clicked."""

    clicked = Signal(str, str)  # target, alert id
    noticeClicked = Signal(str)  # the notice's topic, e.g. "silences"

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.setObjectName("toast")
        self.title = QLabel()
        self.title.setObjectName("toastTitle")
        self.body = QLabel()
        self.body.setObjectName("toastBody")
        self.body.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.addWidget(self.title)
        layout.addWidget(self.body)
        self.setFixedWidth(380)
        self._timer = QTimer(self)
        self._timer.setObjectName("gpufleet-toast-timer")
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self.hide)
        self.alert: AlertRow | None = None
        self.topic = ""  # what a shown notice is about, "" for an alert
        self._anchor: QWidget | None = None
        self.hide()

    def set_anchor(self, anchor: QWidget) -> None:
        """Sit in `anchor`'s top-right corner (a widget inside the parent, with no table)."""
        self._anchor = anchor
        if self.isVisible():
            self._place()

    def show_alert(self, alert: AlertRow, title: str) -> None:
        self.alert, self.topic = alert, ""
        self._pop(title, alert.summary, alert.severity.label)
        if alert.severity is Severity.CRITICAL:
            self._timer.stop()
        else:
            self._timer.start(SHOW_MS)

    def show_notice(self, title: str, body: str, topic: str) -> None:
        """A notice that is no alert (a silence about to end); it goes by itself."""
        if self.isVisible() and self.alert is not None and self.alert.severity is Severity.CRITICAL:
            return  # a critical alert stays in view until clicked
        self.alert, self.topic = None, topic
        self._pop(title, body, "info")
        self._timer.start(SHOW_MS)

    def _pop(self, title: str, body: str, severity: str) -> None:
        self.title.setText(title)
        self.body.setText(body)
        self.setProperty("severity", severity)
        self.style().unpolish(self)
        self.style().polish(self)
        self.adjustSize()
        self._place()
        self.show()
        self.raise_()

    def _place(self) -> None:
        parent = self.parentWidget()
        if parent is None:
            return
        anchor = self._anchor if self._anchor is not None and self._anchor.isVisible() else None
        if anchor is None:  # no anchor: the parent's top right
            self.move(parent.width() - self.width() - MARGIN, MARGIN)
            return
        corner = anchor.mapTo(parent, QPoint(anchor.width(), 0))
        self.move(max(0, corner.x() - self.width() - MARGIN), corner.y() + MARGIN)

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if self.alert is not None:
            self.clicked.emit(self.alert.target, self.alert.id)
        elif self.topic:
            self.noticeClicked.emit(self.topic)
        self.hide()
