"""InventoryTableModel: one row per GPU of the fleet, drifting values marked; and its proxy."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import (
    QModelIndex,
    QPersistentModelIndex,
    QSortFilterProxyModel,
    Qt,
)
from PySide6.QtGui import QColor

from console.fleet.identity import Identity
from console.fleet.inventory import (
    COLUMNS,
    Drift,
    DriftKey,
    InventoryRow,
    cell_text,
    drift_count,
    find_drift,
    inventory_rows,
    natural_key,
)
from console.fleet.model import Change, FleetModel
from console.fleet.updates import NodeInfo
from console.qt.row_table import RowTableModel

Index = QModelIndex | QPersistentModelIndex
DRIFT_ROLE = int(Qt.ItemDataRole.UserRole) + 1  # bool: the value differs from the majority
SORT_ROLE = int(Qt.ItemDataRole.UserRole) + 2  # a natural sort key: "node-2" before "node-10"
# Translucent amber: readable under the dark theme's and the default light text.
DRIFT_BACKGROUND = QColor(214, 158, 46, 110)
NOT_REPORTED = "not reported by the node"

Signature = tuple[tuple[str, NodeInfo, Identity | None], ...]


def inventory_signature(fleet: FleetModel) -> Signature:
    """What the table shows depends on nothing else: compare this to know when to reset."""
    return tuple((node.target, node.info, node.identity) for node in fleet if node.info is not None)


class InventoryTableModel(RowTableModel):
    headers = tuple(c.header for c in COLUMNS)

    def __init__(self, fleet: FleetModel) -> None:
        super().__init__()
        self._fleet = fleet
        self._signature: Signature | None = None
        self._identities: tuple[tuple[str, int, int], ...] = ()
        self._rows: list[InventoryRow] = []
        self._drift: dict[DriftKey, Drift] = {}
        self.refresh()

    def refresh(self) -> None:
        """Rebuild when a node's inventory came, went or changed; otherwise do nothing."""
        # Called every frame: first a cheap test on object identity; the deep
        # comparison only when some node's inventory object was replaced.
        identities = tuple((n.target, id(n.info), id(n.identity)) for n in self._fleet)
        if identities == self._identities:
            return
        self._identities = identities
        signature = inventory_signature(self._fleet)
        if signature == self._signature:
            return  # equal NodeInfos after a reconnect: keep sort and selection
        self.beginResetModel()
        self._signature = signature
        self._rows = inventory_rows(self._fleet)
        self._drift = find_drift(self._rows)
        self.endResetModel()

    def on_fleet_changed(self, _changes: dict[str, Change]) -> None:
        self.refresh()

    def rows(self) -> list[InventoryRow]:
        return list(self._rows)

    def drift_count(self) -> int:
        """Differing values, a node's driver counted once however many GPUs it has."""
        return drift_count(self._rows, self._drift)

    def drift(self, row: int, column: int) -> Drift | None:
        return self._drift.get((row, COLUMNS[column].key))

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        text = cell_text(self._rows[index.row()], COLUMNS[index.column()].key)
        drift = self.drift(index.row(), index.column())
        if role == Qt.ItemDataRole.DisplayRole:
            return text
        if role == DRIFT_ROLE:
            return drift is not None
        if role == SORT_ROLE:
            return natural_key(text)
        if role == Qt.ItemDataRole.BackgroundRole:
            return DRIFT_BACKGROUND if drift else None
        if role == Qt.ItemDataRole.ToolTipRole:
            return self._tooltip(text, drift)
        return None

    @staticmethod
    def _tooltip(text: str, drift: Drift | None) -> str | None:
        if drift is not None:
            return drift.describe()
        return None if text else NOT_REPORTED


class InventoryFilterProxy(QSortFilterProxyModel):
    """Free-text filter over every column; sorts versions and names naturally."""

    def __init__(self) -> None:
        super().__init__()
        self.setFilterCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.setFilterKeyColumn(-1)

    def lessThan(self, left: Index, right: Index) -> bool:
        return bool(left.data(SORT_ROLE) < right.data(SORT_ROLE))
