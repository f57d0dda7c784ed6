"""DrainZone: drop a node here (dragged by its block's title line) to drain it in Slurm.

While a node hovers, the zone says what the drop would do, or why not, from
Slurm's view (not a Slurm node, drained already). The drop asks for the reason
first (SlurmPrompts.ask_drain), as the tile menu's "Drain … in Slurm…" does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from PySide6.QtCore import QMimeData, Signal
from PySide6.QtWidgets import QWidget

from console.fleet.placement import Verdict
from console.qt.mime import NODE_MIME
from console.views.common.drop_zone import DropZone

IDLE_TEXT = "Drain zone: drag a node here by its title line to drain it in Slurm"
# (target, Slurm node name) to drain, or None, and the verdict.
DrainJudge = Callable[[QMimeData], tuple[tuple[str, str] | None, Verdict]]


class DrainZone(DropZone):
    drainRequested = Signal(str, str)  # target, Slurm node name; the reason is asked next

    def __init__(self, judge: DrainJudge, parent: QWidget | None = None) -> None:
        super().__init__(IDLE_TEXT, NODE_MIME, "Cannot drain: ", parent)
        self.setObjectName("drainZone")
        self.setToolTip("Drag a node's block by its title line from the grid to here.")
        self._judge = judge

    def judge_drop(self, data: QMimeData) -> tuple[object | None, Verdict]:
        return self._judge(data)

    def dropped(self, what: object) -> None:
        target, node = cast(tuple[str, str], what)  # what judge_drop gave
        self.drainRequested.emit(target, node)
