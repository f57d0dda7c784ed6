"""SlurmReservationTableModel: Slurm's reservations, one row each (name, nodes, for whom, when)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from PySide6.QtCore import Qt

from console.fleet.slurm_model import SlurmReservation
from console.fleet.slurm_view import SlurmView
from console.qt.row_table import RowTableModel

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
    record_role = RESERVATION_ROLE
    _rows: Sequence[SlurmReservation]

    def on_view_changed(self, view: SlurmView) -> None:
        self._show_rows(view.reservations)

    def cell(self, reservation: SlurmReservation, column: int, role: int) -> Any:
        return CELLS[column][1](reservation) if role == Qt.ItemDataRole.DisplayRole else None
