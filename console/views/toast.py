"""Toast: an in-window alert popup, bottom right; click it to open the GPU."""

from __future__ import annotations

from PySide6.QtCore import QTimer, Signal
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import QFrame, QLabel, QVBoxLayout, QWidget

from console.fleet.alerts import AlertRow, Severity

SHOW_MS = 8000
MARGIN = 16


class Toast(QFrame):
    """One toast at a time: a newer alert replaces the text. Critical ones stay until clicked."""

    clicked = Signal(str, str)  # target, alert id

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
        self.hide()

    def show_alert(self, alert: AlertRow, title: str) -> None:
        self.alert = alert
        self.title.setText(title)
        self.body.setText(alert.summary)
        self.setProperty("severity", alert.severity.label)
        self.style().unpolish(self)
        self.style().polish(self)
        self.adjustSize()
        self._place()
        self.show()
        self.raise_()
        if alert.severity is Severity.CRITICAL:
            self._timer.stop()
        else:
            self._timer.start(SHOW_MS)

    def _place(self) -> None:
        parent = self.parentWidget()
        if parent is not None:
            self.move(parent.width() - self.width() - MARGIN, parent.height() - self.height() - 40)

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if self.alert is not None:
            self.clicked.emit(self.alert.target, self.alert.id)
        self.hide()
