"""KillZone: drop a process row here to kill it (after a confirmation).

While a process hovers, the zone says what the drop would do, or why it would
be refused (no start time, the process is gone, the node is not connected).
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QDragEnterEvent, QDragLeaveEvent, QDragMoveEvent, QDropEvent
from PySide6.QtWidgets import QLabel, QWidget

from console.fleet.control_requests import KillTarget
from console.fleet.placement import Verdict
from console.qt.mime import PROCESS_MIME, read_process

IDLE_TEXT = "Kill zone: drop a process row here to kill it"


class KillZone(QLabel):
    killRequested = Signal(object)  # KillTarget; the confirmation comes after

    def __init__(
        self, judge: Callable[[KillTarget], Verdict], parent: QWidget | None = None
    ) -> None:
        super().__init__(IDLE_TEXT, parent)
        self.setObjectName("killZone")
        self.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.setWordWrap(True)
        self.setAcceptDrops(True)
        self.setMinimumHeight(34)
        self.setToolTip("Drag a row of the process table here to kill that process.")
        self._judge = judge
        self.verdict: Verdict | None = None  # while a process hovers

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if not event.mimeData().hasFormat(PROCESS_MIME):
            event.ignore()
            return
        event.acceptProposedAction()  # follow the drag, even to say why not
        self._show(self._verdict_of(event))

    def dragMoveEvent(self, event: QDragMoveEvent) -> None:
        verdict = self._verdict_of(event)
        self._show(verdict)
        if verdict.ok:
            event.acceptProposedAction()
        else:
            event.ignore()

    def dragLeaveEvent(self, event: QDragLeaveEvent) -> None:
        self._show(None)

    def dropEvent(self, event: QDropEvent) -> None:
        victim = read_process(event.mimeData())
        verdict = self._verdict_of(event)
        self._show(None)
        if victim is None or not verdict.ok:
            event.ignore()
            return
        event.acceptProposedAction()
        self.killRequested.emit(victim)

    def _verdict_of(self, event: QDragMoveEvent | QDropEvent | QDragEnterEvent) -> Verdict:
        victim = read_process(event.mimeData())
        if victim is None:
            return Verdict(False, "not a process")
        return self._judge(victim)

    def _show(self, verdict: Verdict | None) -> None:
        self.verdict = verdict
        if verdict is None:
            self.setText(IDLE_TEXT)
        else:
            self.setText(("Release to " if verdict.ok else "Cannot kill: ") + verdict.reason)
        # The theme styles the zone by verdict: QLabel#killZone[verdict="accept"].
        self.setProperty("verdict", "" if verdict is None else "accept" if verdict.ok else "refuse")
        self.style().unpolish(self)
        self.style().polish(self)
