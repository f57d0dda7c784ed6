"""ReservationTableModel: every reservation in force across the fleet, for a QTableView.

Rebuilt when the fleet's reservations change (ControlBook.version); otherwise only
the time-left column moves, once a second. The filter proxy asks the fleet
layer's ReservationLine.matches, so the panel and any other view filter alike.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, Qt

from console.fleet.model import Change
from console.fleet.placement import clock_text, gpus_text
from console.fleet.reservations import ReservationLine, reservation_lines, until_text
from console.qt.fleet_table import FleetTableModel
from console.qt.row_table import SORT_ROLE, SortKeyProxy

Index = QModelIndex | QPersistentModelIndex
COLUMNS = (
    "Node",
    "GPUs",
    "Holder",
    "Until",
    "Created",
    "Created by",
    "Reason",
)  # Reason: the long one
UNTIL_COLUMN = COLUMNS.index("Until")


class ReservationTableModel(FleetTableModel):
    headers = COLUMNS

    def prepare(self) -> None:
        self._rows: list[ReservationLine] = []
        self._version = -1
        self._second = -1

    def line(self, row: int) -> ReservationLine:
        return self._rows[row]

    def row_of(self, target: str, reservation_id: str) -> int | None:
        found = (i for i, line in enumerate(self._rows)
                 if line.reservation.uid == (target, reservation_id))  # fmt: skip
        return next(found, None)

    def on_fleet_changed(self, _changes: dict[str, Change] | None = None) -> None:
        # A new book, or a new second (the times left move on; one may run out and go).
        if (self._fleet.control.version, self._clock() // 1000) != (self._version, self._second):
            self.refresh()

    def refresh(self) -> None:
        now = self._clock()
        self._version, self._second = self._fleet.control.version, now // 1000
        rows = reservation_lines(self._fleet.control.reservations(), self._fleet.name_of, now)
        if rows == self._rows:  # the same lines (a second on; replay's moments' books)
            if rows:  # the times left only
                top, bottom = self.index(0, UNTIL_COLUMN), self.index(len(rows) - 1, UNTIL_COLUMN)
                self.dataChanged.emit(top, bottom, [Qt.ItemDataRole.DisplayRole])
            return
        self.beginResetModel()
        self._rows = rows
        self.endResetModel()

    def cell(self, line: ReservationLine, column: int, role: int) -> Any:
        r = line.reservation
        if role == SORT_ROLE:
            keys = (line.node, r.gpu_indices, r.holder, r.until_unix_ms, r.created_unix_ms,
                    r.created_by, r.reason)  # fmt: skip
            return keys[column]
        if role != Qt.ItemDataRole.DisplayRole:
            return None
        now = self._clock()
        cells = (line.node, gpus_text(r.gpu_indices), r.holder, until_text(r, now),
                 clock_text(r.created_unix_ms, now), r.created_by, r.reason)  # fmt: skip
        return cells[column]


class ReservationFilterProxy(SortKeyProxy):
    """Filters by ReservationLine.matches; sorts by each column's key."""

    def __init__(self) -> None:
        super().__init__()
        self._text = ""
        self.setSortRole(SORT_ROLE)

    def set_text(self, text: str) -> None:
        with self._filter_change():
            self._text = text

    def filterAcceptsRow(self, source_row: int, source_parent: Index) -> bool:
        model = self.sourceModel()
        if not isinstance(model, ReservationTableModel):
            return True
        return model.line(source_row).matches(self._text)
