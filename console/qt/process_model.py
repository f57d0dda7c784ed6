"""ProcessTableModel: the processes on one GPU, for a QTableView."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt

from console.fleet.updates import ProcessRow

Index = QModelIndex | QPersistentModelIndex
# Command last: it is the long one and takes the stretch.
_COLUMNS = ("PID", "User", "GPU memory", "Container", "Slurm job", "Command")


def _mib(value: int | None) -> str:
    return "n/a" if value is None else f"{value / 1024**2:,.0f} MiB"


class ProcessTableModel(QAbstractTableModel):
    def __init__(self) -> None:
        super().__init__()
        self._rows: tuple[ProcessRow, ...] = ()

    def set_processes(self, rows: tuple[ProcessRow, ...]) -> None:
        if rows == self._rows:
            return
        self.beginResetModel()
        self._rows = rows
        self.endResetModel()

    def process(self, row: int) -> ProcessRow:
        return self._rows[row]

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(_COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = 0) -> Any:
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return _COLUMNS[section]
        return None

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
