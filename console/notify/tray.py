"""Alerts as system-tray balloon messages, where the desktop has a tray (and no D-Bus)."""

from __future__ import annotations

import logging
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QSystemTrayIcon

from console.fleet.alert_rows import AlertRow
from console.notify import text
from gpufleet.v1.alert_severity import Severity

log = logging.getLogger(__name__)

ICON_PATH = Path(__file__).resolve().parents[2] / "resources" / "icons" / "gpufleet.svg"
MESSAGE_ICONS = {
    Severity.INFO: QSystemTrayIcon.MessageIcon.Information,
    Severity.WARNING: QSystemTrayIcon.MessageIcon.Warning,
    Severity.CRITICAL: QSystemTrayIcon.MessageIcon.Critical,
}
SHOW_MS = {Severity.INFO: 5_000, Severity.WARNING: 10_000, Severity.CRITICAL: 60_000}


class TrayNotifier(QObject):
    """One tray icon; each alert a balloon message; a click on it opens the last alert."""

    activated = Signal(str, str)  # (target, alert id) of the message clicked

    def __init__(self, tray: QSystemTrayIcon | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("tray-notifier")
        if tray is None and QSystemTrayIcon.isSystemTrayAvailable():
            tray = QSystemTrayIcon(QIcon(str(ICON_PATH)), self)
            tray.setToolTip("GPU Fleet Console")
            tray.show()
        self._tray = tray
        self._last: tuple[str, str] | None = None
        if tray is not None:
            tray.messageClicked.connect(self._on_tray_message_clicked)

    @property
    def available(self) -> bool:
        return self._tray is not None and QSystemTrayIcon.supportsMessages()

    def show(self, alert: AlertRow, node_name: str) -> None:
        if self._tray is None:
            return
        self._last = alert.uid
        self._tray.showMessage(
            text.headline(alert, node_name),
            text.body(alert),
            MESSAGE_ICONS.get(alert.severity, QSystemTrayIcon.MessageIcon.Information),
            SHOW_MS.get(alert.severity, 10_000),
        )

    def _on_tray_message_clicked(self) -> None:
        if self._last is not None:
            self.activated.emit(*self._last)
