"""SlurmReservationTableModel: Slurm's reservations, one row each (name, nodes, for whom, when)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from PySide6.QtCore import Qt

from console.fleet.slurm_model import SlurmReservation
from console.fleet.slurm_view import SlurmView
from console.qt.row_table import Index, RowTableModel

RESERVATION_ROLE = int(Qt.ItemDataRole.UserRole) + 41


def _when(r: SlurmReservation) -> str:
    start, end = r.start.astimezone(), r.end.astimezone()
    return f"{start:%b %d %H:%M} to {end:%b %d %H:%M}"


CELLS = (
    ("Reservation", lambda r: r.name),
    ("Nodes", lambda r: r.nodes),
    ("Users", lambda r: ", ".join(r.users)),
    ("Accounts", lambda r: ", ".join(r.accounts)),
    ("When", _when),
    ("Flags", lambda r: ", ".join(r.flags)),
)


class SlurmReservationTableModel(RowTableModel):
    headers = tuple(c[0] for c in CELLS)

    def __init__(self) -> None:
        super().__init__()
        self._rows: Sequence[SlurmReservation] = ()

    def on_view_changed(self, view: SlurmView) -> None:
        if view.reservations != tuple(self._rows):
            self.beginResetModel()
            self._rows = view.reservations
            self.endResetModel()

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        reservation = self._rows[index.row()]
        if role == Qt.ItemDataRole.DisplayRole:
            return CELLS[index.column()][1](reservation)
        if role == RESERVATION_ROLE:
            return reservation
        return None
