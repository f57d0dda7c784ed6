"""KillZone: drop a process row here to kill it (after a confirmation).

While a process hovers, the zone says what the drop would do, or why it would
be refused (no start time, the process is gone, the node is not connected).
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QMimeData, Signal
from PySide6.QtWidgets import QWidget

from console.fleet.control_requests import KillTarget
from console.fleet.placement import Verdict
from console.qt.mime import PROCESS_MIME, read_process
from console.views.common.drop_zone import DropZone

IDLE_TEXT = "Kill zone: drop a process row here to kill it"


class KillZone(DropZone):
    killRequested = Signal(object)  # KillTarget; the confirmation comes after

    def __init__(
        self, judge: Callable[[KillTarget], Verdict], parent: QWidget | None = None
    ) -> None:
        super().__init__(IDLE_TEXT, PROCESS_MIME, "Cannot kill: ", parent)
        self.setObjectName("killZone")
        self.setToolTip("Drag a row of the process table here to kill that process.")
        self._judge = judge

    def judge_drop(self, data: QMimeData) -> tuple[object | None, Verdict]:
        victim = read_process(data)
        if victim is None:
            return None, Verdict(False, "not a process")
        return victim, self._judge(victim)

    def dropped(self, what: object) -> None:
        self.killRequested.emit(what)
