"""EventLogModel: events as they arrived, newest first, each once."""

from __future__ import annotations

import time
from typing import Any

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, Qt

from console.fleet.alerts import EventRow
from console.qt.row_table import RowTableModel

Index = QModelIndex | QPersistentModelIndex
COLUMNS = ("Time", "Node", "GPU", "Event", "Summary", "By", "Seq")
MAX_ROWS = 5000


class EventLogModel(RowTableModel):
    headers = COLUMNS

    def __init__(self, node_name: Any = None) -> None:
        super().__init__()
        self._rows: list[EventRow] = []
        self._node_name = node_name or (lambda target: target)

    def add_events(self, events: list[EventRow]) -> None:
        """Called once per frame with the events that arrived; newest go on top."""
        if not events:
            return
        self.beginInsertRows(QModelIndex(), 0, len(events) - 1)
        self._rows[:0] = reversed(events)
        self.endInsertRows()
        if len(self._rows) > MAX_ROWS:
            self.beginRemoveRows(QModelIndex(), MAX_ROWS, len(self._rows) - 1)
            del self._rows[MAX_ROWS:]
            self.endRemoveRows()

    def event_row(self, row: int) -> EventRow:
        return self._rows[row]

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or role != Qt.ItemDataRole.DisplayRole:
            return None
        e = self._rows[index.row()]
        stamp = time.strftime("%H:%M:%S", time.localtime(e.time_unix_ms / 1000))
        cells = (
            stamp, self._node_name(e.target), "" if e.gpu_index is None else str(e.gpu_index),
            e.kind.replace("_", " "), e.summary, e.actor,
            str(e.seq) if e.seq > 0 else "console",  # the console's own events (negative seqs)
        )  # fmt: skip
        return cells[index.column()]
