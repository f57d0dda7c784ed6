"""ProcessTableModel: the processes on one GPU, with nvitop's columns, for a QTableView."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from PySide6.QtCore import QMimeData, QModelIndex, QPersistentModelIndex, Qt

from console.fleet.control_requests import KillTarget
from console.fleet.process_cells import ELAPSED_COLUMN, HEADERS, process_cells
from console.fleet.process_row import ProcessRow
from console.qt.mime import PROCESS_MIME, process_mime
from console.qt.row_table import SORT_ROLE, RowTableModel

Index = QModelIndex | QPersistentModelIndex


class ProcessTableModel(RowTableModel):
    """A row can be dragged (onto the kill zone): the drag names node, GPU, pid and start time."""

    headers = HEADERS

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        """`clock`: unix seconds, for the elapsed time (now minus the start time)."""
        super().__init__()
        self._clock = clock
        self._rows: tuple[ProcessRow, ...] = ()
        self._where: tuple[str, str, int] | None = None  # (target, node name, GPU)
        self._second = -1

    def set_processes(
        self, rows: tuple[ProcessRow, ...], where: tuple[str, str, int] | None = None
    ) -> None:
        second = int(self._clock())
        if rows == self._rows and where == self._where:
            if second != self._second and rows:  # the same processes, a second older
                self._second = second
                top, bottom = (
                    self.index(0, ELAPSED_COLUMN),
                    self.index(len(rows) - 1, ELAPSED_COLUMN),
                )
                self.dataChanged.emit(top, bottom, [Qt.ItemDataRole.DisplayRole])
            return
        if where == self._where and _identities(rows) == _identities(self._rows) and rows:
            # The same processes with new figures (SM %, CPU, memory): changed in place.
            # A reset would drop the view's pressed row and selection every sample, so
            # a drag that began between two samples never started.
            self._rows, self._second = rows, second
            last = self.index(len(rows) - 1, self.columnCount() - 1)
            self.dataChanged.emit(self.index(0, 0), last)
            return
        self.beginResetModel()
        self._rows, self._where, self._second = rows, where, second
        self.endResetModel()

    def process(self, row: int) -> ProcessRow:
        return self._rows[row]

    def kill_target(self, row: int) -> KillTarget | None:
        """The process in `row` as a kill names it, or None without a GPU shown."""
        if self._where is None or not 0 <= row < len(self._rows):
            return None
        target, node_name, gpu = self._where
        return KillTarget(target, node_name, gpu, self._rows[row])

    def flags(self, index: Index) -> Qt.ItemFlag:
        flags = super().flags(index)
        return flags | Qt.ItemFlag.ItemIsDragEnabled if index.isValid() else flags

    def mimeTypes(self) -> list[str]:
        return [PROCESS_MIME]

    def mimeData(self, indexes: Sequence[QModelIndex]) -> QMimeData:
        rows = sorted({i.row() for i in indexes if i.isValid()})
        victim = self.kill_target(rows[0]) if rows else None
        return process_mime(victim) if victim is not None else QMimeData()

    def supportedDragActions(self) -> Qt.DropAction:
        return Qt.DropAction.MoveAction

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or role not in (Qt.ItemDataRole.DisplayRole, SORT_ROLE):
            return None
        cells = process_cells(self._rows[index.row()], self._clock())
        found = cells.texts if role == Qt.ItemDataRole.DisplayRole else cells.keys
        return found[index.column()]


def _identities(rows: Sequence[ProcessRow]) -> list[tuple[int, int | None]]:
    """Which processes, in order: pid and start time (a reused pid is another process)."""
    return [(row.pid, row.start_time_unix_ms) for row in rows]
