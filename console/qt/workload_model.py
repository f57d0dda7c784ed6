"""WorkloadTableModel: every node's workload queue as rows; queued rows can be dragged."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from PySide6.QtCore import (
    QMimeData,
    QModelIndex,
    QPersistentModelIndex,
    Qt,
)

from console.fleet.control import WorkloadRow
from console.fleet.fleet_queue import qualified_id
from console.fleet.model import Change, FleetModel
from console.fleet.placement import gib_text
from console.fleet.process_cells import one_line
from console.qt.mime import WORKLOAD_MIME, workload_mime
from console.qt.row_table import SORT_ROLE, EndedRowsProxy, RowTableModel
from console.qt.status_inks import Ink, colour
from gpufleet.states import WorkloadState

Index = QModelIndex | QPersistentModelIndex
COLUMNS = ("Node", "ID", "Name", "Owner", "GPUs", "Min memory", "State", "On GPUs", "Since",
           "Priority", "Time limit", "Waiting because", "Command")  # fmt: skip
STATE_COLUMN = COLUMNS.index("State")
WORKLOAD_ROLE = int(Qt.ItemDataRole.UserRole) + 1
STATE_INKS = {  # the theme's colours (console/qt/status_inks.py)
    WorkloadState.QUEUED: Ink.INFO,
    WorkloadState.RUNNING: Ink.GOOD,
    WorkloadState.FAILED: Ink.CRITICAL,
    WorkloadState.CANCELLED: Ink.MUTED,
    WorkloadState.TIMED_OUT: Ink.WARNING,
}


def limit_text(seconds: int) -> str:
    """ "1:30:00", or "" for none."""
    if not seconds:
        return ""
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


def state_text(w: WorkloadRow) -> str:
    if w.state is WorkloadState.FINISHED and w.exit_code not in (None, 0):
        return f"finished ({w.exit_code})"
    if w.state is WorkloadState.FAILED and w.exit_code is not None:
        return f"failed ({w.exit_code})"
    return w.state.value


class WorkloadTableModel(RowTableModel):
    headers = COLUMNS
    record_role = WORKLOAD_ROLE

    def __init__(self, fleet: FleetModel) -> None:
        super().__init__()
        self._fleet = fleet
        self._rows: list[WorkloadRow] = []
        self._version = -1
        self.refresh()

    def refresh(self) -> None:
        if self._fleet.control.version == self._version:
            return
        self._version = self._fleet.control.version
        # Queued first in the queue's order (priority, then oldest first), then running,
        # then ended, newest first.
        rows = sorted(
            self._fleet.control.workloads(),
            key=lambda w: (
                w.state.rank,
                -w.priority if w.state.rank == 0 else 0,
                w.since_unix_ms * (1 if w.state.rank == 0 else -1),
            ),
        )
        if rows == self._rows:
            return  # a new book with the same rows (replay's moments): no reset, no refit
        self.beginResetModel()
        self._rows = rows
        self.endResetModel()

    def on_fleet_changed(self, _changes: dict[str, Change]) -> None:
        self.refresh()

    def workload(self, row: int) -> WorkloadRow:
        return self._rows[row]

    def row_of(self, target: str, workload_id: str) -> int | None:
        return next((i for i, w in enumerate(self._rows) if w.uid == (target, workload_id)), None)

    def flags(self, index: Index) -> Qt.ItemFlag:
        flags = super().flags(index)
        if index.isValid() and self._rows[index.row()].state is WorkloadState.QUEUED:
            flags |= Qt.ItemFlag.ItemIsDragEnabled  # a queued workload goes onto a GPU tile
        return flags

    def mimeTypes(self) -> list[str]:
        return [WORKLOAD_MIME]

    def mimeData(self, indexes: Sequence[QModelIndex]) -> QMimeData:
        rows = sorted({i.row() for i in indexes if i.isValid()})
        queued = [self._rows[r] for r in rows if self._rows[r].state is WorkloadState.QUEUED]
        # One workload per drag: a drop assigns exactly one.
        return workload_mime(queued[0]) if queued else QMimeData()

    def supportedDragActions(self) -> Qt.DropAction:
        return Qt.DropAction.CopyAction

    def cell(self, w: WorkloadRow, column: int, role: int) -> Any:
        if role == Qt.ItemDataRole.DisplayRole:
            return self._text(w, column)
        if role == SORT_ROLE:
            return self._sort_key(w, column)
        if role == Qt.ItemDataRole.ForegroundRole and column == STATE_COLUMN:
            return colour(STATE_INKS.get(w.state))
        if role == Qt.ItemDataRole.ToolTipRole:
            lines = [" ".join(w.argv), w.detail, w.wait_reason]
            if w.moved_from:
                lines.append(f"moved here from {w.moved_from}")
            return "\n".join(line for line in lines if line)
        return None

    def _text(self, w: WorkloadRow, column: int) -> str:
        since = time.strftime("%H:%M:%S", time.localtime(w.since_unix_ms / 1000))
        memory = gib_text(w.min_free_memory_bytes) if w.min_free_memory_bytes else ""
        gpus = ", ".join(str(g) for g in w.gpu_indices)
        if not gpus and w.held_gpu_indices:
            gpus = "held: " + ", ".join(str(g) for g in w.held_gpu_indices)
        needed = f"{w.gpu_count}" + (" auto" if w.auto_place else "")
        node = self._node_name(w.target)
        cells = (
            node, qualified_id(node, w.id), w.name, w.owner, needed, memory, state_text(w), gpus,
            since, str(w.priority) if w.priority else "", limit_text(w.time_limit_s),
            w.wait_reason if w.state is WorkloadState.QUEUED else "", one_line(" ".join(w.argv)),
        )  # fmt: skip
        return cells[column]

    def _node_name(self, target: str) -> str:
        return self._fleet.name_of(target)

    @staticmethod
    def _sort_key(w: WorkloadRow, column: int) -> Any:
        keys = {
            "GPUs": w.gpu_count, "Min memory": w.min_free_memory_bytes, "State": w.state.rank,
            "Since": w.since_unix_ms, "Priority": w.priority, "Time limit": w.time_limit_s,
        }  # fmt: skip
        return keys.get(COLUMNS[column])


class WorkloadFilterProxy(EndedRowsProxy):
    """Everything, or only queued and running workloads; free-text filter."""

    record_role = WORKLOAD_ROLE

    def __init__(self) -> None:
        super().__init__(show_ended=True)

    def has_ended(self, workload: WorkloadRow) -> bool:
        return workload.state.ended
