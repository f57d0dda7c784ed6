"""Route Qt's own log messages into Python logging."""

from __future__ import annotations

import logging

from PySide6.QtCore import QMessageLogContext, QtMsgType, qInstallMessageHandler

log = logging.getLogger("qt")
_LEVELS = {
    QtMsgType.QtDebugMsg: logging.DEBUG,
    QtMsgType.QtInfoMsg: logging.INFO,
    QtMsgType.QtWarningMsg: logging.WARNING,
    QtMsgType.QtCriticalMsg: logging.ERROR,
    QtMsgType.QtFatalMsg: logging.CRITICAL,
}


# The offscreen platform (--screenshot) cannot resize or raise native windows and
# says so; that is expected there, not worth a warning.
_EXPECTED_OFFSCREEN = ("This plugin does not support",)


def _handle(kind: QtMsgType, context: QMessageLogContext, message: str) -> None:
    level = _LEVELS.get(kind, logging.WARNING)
    if message.startswith(_EXPECTED_OFFSCREEN):
        level = logging.DEBUG
    log.log(level, "%s (%s)", message, context.category)


def install_qt_log_handler() -> None:
    qInstallMessageHandler(_handle)
