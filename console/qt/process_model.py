"""ProcessTableModel: the processes on one GPU, for a QTableView."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from PySide6.QtCore import QMimeData, QModelIndex, QPersistentModelIndex, Qt

from console.fleet.control_requests import KillTarget
from console.fleet.updates import ProcessRow
from console.qt.mime import PROCESS_MIME, process_mime
from console.qt.row_table import RowTableModel

Index = QModelIndex | QPersistentModelIndex
# Command last: it is the long one and takes the stretch.
_COLUMNS = ("PID", "User", "GPU memory", "Container", "Slurm job", "Command")


def _mib(value: int | None) -> str:
    return "n/a" if value is None else f"{value / 1024**2:,.0f} MiB"


class ProcessTableModel(RowTableModel):
    headers = _COLUMNS

    """A row can be dragged (onto the kill zone): the drag names node, GPU, pid and start time."""

    def __init__(self) -> None:
        super().__init__()
        self._rows: tuple[ProcessRow, ...] = ()
        self._where: tuple[str, str, int] | None = None  # (target, node name, GPU)

    def set_processes(
        self, rows: tuple[ProcessRow, ...], where: tuple[str, str, int] | None = None
    ) -> None:
        if rows == self._rows and where == self._where:
            return
        self.beginResetModel()
        self._rows, self._where = rows, where
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
        if not index.isValid() or role != Qt.ItemDataRole.DisplayRole:
            return None
        p = self._rows[index.row()]
        cells = (
            str(p.pid),
            p.user or "n/a",
            _mib(p.gpu_memory_bytes),
            (p.container_id or "")[:12],
            p.slurm_job_id or "",
            p.command or "n/a",
        )
        return cells[index.column()]
