"""Quit the Qt event loop on SIGTERM, SIGINT and SIGHUP, so what follows the loop still runs.

Python runs a signal handler only when the interpreter gets control, and Qt's
event loop may not hand it any for a long while: a SIGTERM would wait, or
(with the default handler) end the process before the demo could end its
daemons and remove its profile. Here the C handler writes the signal's number
to a socket (signal.set_wakeup_fd) that Qt watches, and the loop quits at once.
"""

from __future__ import annotations

import contextlib
import signal
import socket

from PySide6.QtCore import QCoreApplication, QObject, QSocketNotifier

SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class SignalQuitter(QObject):
    """Owns the wakeup socket and its notifier; quits `app` when a signal arrives."""

    def __init__(self, app: QCoreApplication) -> None:
        super().__init__(app)
        self.setObjectName("signal-quitter")
        self._reader, self._writer = socket.socketpair()
        for end in (self._reader, self._writer):
            end.setblocking(False)
        self._notifier = QSocketNotifier(self._reader.fileno(), QSocketNotifier.Type.Read, self)
        self._notifier.activated.connect(self._on_wakeup_readable)
        self.received: list[int] = []
        signal.set_wakeup_fd(self._writer.fileno(), warn_on_full_buffer=False)
        for signum in SIGNALS:
            signal.signal(signum, self._note)  # a Python handler: the C one then writes the fd

    def _note(self, signum: int, _frame: object) -> None:
        self.received.append(signum)

    def _on_wakeup_readable(self) -> None:
        with contextlib.suppress(BlockingIOError):
            self._reader.recv(4096)
        QCoreApplication.quit()


def quit_on_signals(app: QCoreApplication | None = None) -> SignalQuitter:
    """Install the quitter on `app` (default: the running application)."""
    found = app or QCoreApplication.instance()
    assert found is not None, "no Qt application yet"
    return SignalQuitter(found)
