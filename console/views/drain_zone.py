"""DrainZone: drop a node here (dragged by its block's title line) to drain it in Slurm.

While a node hovers, the zone says what the drop would do, or why not, from
Slurm's view (not a Slurm node, drained already). The drop asks for the reason
first (SlurmPrompts.ask_drain), as the tile menu's "Drain … in Slurm…" does.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QMimeData, Qt, Signal
from PySide6.QtGui import QDragEnterEvent, QDragLeaveEvent, QDragMoveEvent, QDropEvent
from PySide6.QtWidgets import QLabel, QWidget

from console.fleet.placement import Verdict
from console.qt.mime import NODE_MIME

IDLE_TEXT = "Drain zone: drag a node here by its title line to drain it in Slurm"
# (target, Slurm node name) to drain, or None, and the verdict.
DrainJudge = Callable[[QMimeData], tuple[tuple[str, str] | None, Verdict]]


class DrainZone(QLabel):
    drainRequested = Signal(str, str)  # target, Slurm node name; the reason is asked next

    def __init__(self, judge: DrainJudge, parent: QWidget | None = None) -> None:
        super().__init__(IDLE_TEXT, parent)
        self.setObjectName("drainZone")
        self.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.setWordWrap(True)
        self.setAcceptDrops(True)
        self.setMinimumHeight(34)
        self.setToolTip("Drag a node's block by its title line from the grid to here.")
        self._judge = judge
        self.verdict: Verdict | None = None  # while a node hovers

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if not event.mimeData().hasFormat(NODE_MIME):
            event.ignore()
            return
        event.acceptProposedAction()  # follow the drag, even to say why not
        self._show(self._judge(event.mimeData())[1])

    def dragMoveEvent(self, event: QDragMoveEvent) -> None:
        verdict = self._judge(event.mimeData())[1]
        self._show(verdict)
        if verdict.ok:
            event.acceptProposedAction()
        else:
            event.ignore()

    def dragLeaveEvent(self, event: QDragLeaveEvent) -> None:
        self._show(None)

    def dropEvent(self, event: QDropEvent) -> None:
        drain, verdict = self._judge(event.mimeData())
        self._show(None)
        if drain is None or not verdict.ok:
            event.ignore()
            return
        event.acceptProposedAction()
        self.drainRequested.emit(*drain)

    def _show(self, verdict: Verdict | None) -> None:
        self.verdict = verdict
        if verdict is None:
            self.setText(IDLE_TEXT)
        else:
            self.setText(("Release to " if verdict.ok else "Cannot drain: ") + verdict.reason)
        # Styled by verdict as the kill zone is: QLabel#drainZone[verdict="accept"].
        self.setProperty("verdict", "" if verdict is None else "accept" if verdict.ok else "refuse")
        self.style().unpolish(self)
        self.style().polish(self)
