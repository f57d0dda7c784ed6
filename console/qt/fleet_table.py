"""FleetTableModel: a table of the fleet's records that reads the time.

The silence and reservation tables: rows built from the fleet model, times and
countdowns read from a clock (unix ms; the tests set it), and the window as
their parent, so that a ticking timer of theirs dies with it (PySide would
otherwise call the tick on a Python object already torn down).
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject

from console.fleet.model import FleetModel
from console.fleet.wall_clock import unix_now_ms
from console.qt.row_table import RowTableModel


class FleetTableModel(RowTableModel):
    """`prepare()` readies a subclass's own state (its timer); `refresh()` reads the rows."""

    def __init__(
        self,
        fleet: FleetModel,
        clock: Callable[[], int] = unix_now_ms,
        parent: QObject | None = None,
    ) -> None:
        super().__init__()
        self.setParent(parent)
        self._fleet, self._clock = fleet, clock
        self.prepare()
        self.refresh()

    def prepare(self) -> None:
        """What the first refresh needs beyond the fleet and the clock."""

    def refresh(self) -> None:
        raise NotImplementedError
