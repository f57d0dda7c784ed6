"""The base of the console's prompt objects: the one dialog each has open at a time."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Qt
from PySide6.QtWidgets import QDialog, QMessageBox


class PromptHost(QObject):
    """Opens its dialogs window-modal with open() (never exec(): the GUI thread goes on),
    and keeps the one open now in `dialog` (tests answer it) until it closes."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.dialog: QDialog | QMessageBox | None = None

    def _open(self, dialog: QDialog | QMessageBox, on_accept: Callable[[], None]) -> None:
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.accepted.connect(on_accept)
        dialog.finished.connect(self._on_dialog_finished)
        self.dialog = dialog
        dialog.open()

    def _on_dialog_finished(self, _result: int) -> None:
        self.dialog = None
