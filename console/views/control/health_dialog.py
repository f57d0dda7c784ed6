"""HealthDialog: why a GPU is drained from placement, or what was done to repair it."""

from __future__ import annotations

from PySide6.QtWidgets import QDialog, QFormLayout, QLabel, QLineEdit, QWidget

from console.views.common.dialog_buttons import ok_cancel_buttons

MAX_REASON = 1000  # the node refuses a longer one (node_daemon/rpc/health_servicer.py)


class HealthDialog(QDialog):
    """One line of text, required: the reason goes to the node's audit log and events."""

    def __init__(
        self,
        title: str,
        what: str,
        ask: str,
        placeholder: str,
        button: str,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("healthDialog")
        self.setWindowTitle(title)
        self.what = QLabel(what)
        self.what.setWordWrap(True)
        self.reason = QLineEdit()
        self.reason.setObjectName("healthReason")
        self.reason.setPlaceholderText(placeholder)
        self.reason.setMaxLength(MAX_REASON)
        self.buttons, self.ok = ok_cancel_buttons(self, button)
        self.ok.setEnabled(False)
        form = QFormLayout(self)
        form.addRow(self.what)
        form.addRow(ask, self.reason)
        form.addRow(self.buttons)
        self.reason.textChanged.connect(self._on_reason_text_changed)
        self.reason.setFocus()

    @property
    def text(self) -> str:
        return self.reason.text().strip()

    def _on_reason_text_changed(self, _text: str) -> None:
        self.ok.setEnabled(bool(self.text))
