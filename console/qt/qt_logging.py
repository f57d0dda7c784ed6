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


def _handle(kind: QtMsgType, context: QMessageLogContext, message: str) -> None:
    log.log(_LEVELS.get(kind, logging.WARNING), "%s (%s)", message, context.category)


def install_qt_log_handler() -> None:
    qInstallMessageHandler(_handle)
