"""SilenceDialog: how long one alert may stay quiet, and why (the reason is required).

For the console's own alerts (a node not responding); a node's alerts get a
matcher silence (NewSilenceDialog). Focus starts in the reason, the field to
fill; the alert's summary is shown, not focusable. Enter silences once a reason
is typed (OK is the default button, disabled until then).
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLineEdit,
    QWidget,
)

from console.views.common.dialog_buttons import ok_cancel_buttons

DURATIONS = (("15 minutes", 900), ("1 hour", 3600), ("4 hours", 14400), ("1 day", 86400),
             ("7 days", 604800))  # fmt: skip


class SilenceDialog(QDialog):
    def __init__(self, alert_summary: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("silenceDialog")
        self.setWindowTitle("Silence alert")
        self.duration = QComboBox()
        for label, seconds in DURATIONS:
            self.duration.addItem(label, seconds)
        self.duration.setCurrentIndex(1)
        self.reason = QLineEdit()
        self.reason.setPlaceholderText("why it may stay quiet, e.g. card swap scheduled")
        self.buttons, ok = ok_cancel_buttons(self, "Silence")
        ok.setDefault(True)
        form = QFormLayout(self)
        summary = QLineEdit(alert_summary, readOnly=True)
        summary.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        form.addRow("Alert", summary)
        form.addRow("For", self.duration)
        form.addRow("Reason", self.reason)
        form.addRow(self.buttons)
        self.reason.textChanged.connect(self._on_reason_text_changed)
        self._on_reason_text_changed("")
        self.reason.setFocus()

    def _on_reason_text_changed(self, text: str) -> None:
        ok = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        ok.setEnabled(bool(text.strip()))

    @property
    def duration_s(self) -> int:
        return int(self.duration.currentData())
