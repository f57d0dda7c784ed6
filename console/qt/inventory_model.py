"""InventoryTableModel: one row per GPU of the fleet, drifting values marked; and its proxy."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import (
    QModelIndex,
    QPersistentModelIndex,
    Qt,
    Signal,
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
    natural_key,
    node_rows,
)
from console.fleet.model import Change, FleetModel
from console.fleet.updates import NodeInfo
from console.qt.row_table import RowTableModel, SortKeyProxy

Index = QModelIndex | QPersistentModelIndex
DRIFT_ROLE = int(Qt.ItemDataRole.UserRole) + 1  # bool: the value differs from the majority
SORT_ROLE = int(Qt.ItemDataRole.UserRole) + 2  # a natural sort key: "node-2" before "node-10"
# Translucent amber: readable under the dark theme's and the default light text.
DRIFT_BACKGROUND = QColor(214, 158, 46, 110)
NOT_REPORTED = "not reported by the node"
# The roles data() answers; a view asks a cell for a dozen more (font, alignment,
# check state…), and each of those must cost nothing: a column resize asks them all.
_ANSWERED = frozenset({
    int(Qt.ItemDataRole.DisplayRole), DRIFT_ROLE, SORT_ROLE,
    int(Qt.ItemDataRole.BackgroundRole), int(Qt.ItemDataRole.ToolTipRole),
})  # fmt: skip


@dataclass(frozen=True)
class _NodeRows:
    """A node's rows and the objects they were made from (held: compared by identity)."""

    info: NodeInfo
    identity: Identity | None
    rows: list[InventoryRow]


class InventoryTableModel(RowTableModel):
    headers = tuple(c.header for c in COLUMNS)
    # After any change of rows, drift or not (a reset, rows in or out, cells changed).
    contentsChanged = Signal()

    def __init__(self, fleet: FleetModel) -> None:
        super().__init__()
        self._fleet = fleet
        self._by_node: dict[str, _NodeRows] = {}
        self._rows: list[InventoryRow] = []
        self._drift: dict[DriftKey, Drift] = {}
        self.refresh()

    def refresh(self) -> None:
        """Follow the fleet's inventories, telling views only what changed.

        Called every frame. A node's inventory object is replaced whenever anything in
        it changes, and on a fleet of old daemons that is mostly what the table does not
        show (each history tier's oldest point moves every ten minutes): only a node
        whose object was replaced has its rows made again, and only rows that differ are
        announced. A node's rows come and go as inserted and removed rows, a changed value
        as changed cells, so the view keeps its sort, selection and column widths, and
        never re-sorts or re-measures the fleet's 1,000 GPUs for one node's change.
        """
        fresh: dict[str, _NodeRows] = {}
        for node in self._fleet:
            info, identity = node.info, node.identity
            if info is None:
                continue
            held = self._by_node.get(node.target)
            if held is None or held.info is not info or held.identity is not identity:
                rows = node_rows(node)
                held = _NodeRows(info, identity, held.rows if held and held.rows == rows else rows)
            fresh[node.target] = held
        old = self._by_node
        if fresh.keys() == old.keys() and all(fresh[t].rows is old[t].rows for t in fresh):
            self._by_node = fresh  # equal rows after a reconnect, or only unshown fields
            return
        flagged = self._flagged()
        if [t for t in fresh if t in old] != list(old):
            self._reset(fresh)  # a node gone (or the fleet reordered): rare, start over
        else:
            self._follow(fresh)
            self._drift = find_drift(self._rows)
        self._by_node = fresh
        self._announce_drift(flagged)
        self.contentsChanged.emit()

    def _reset(self, fresh: dict[str, _NodeRows]) -> None:
        self.beginResetModel()
        self._rows = [row for held in fresh.values() for row in held.rows]
        self._drift = find_drift(self._rows)
        self.endResetModel()

    def _follow(self, fresh: dict[str, _NodeRows]) -> None:
        """Apply each node's new rows where its old ones are (every old node is in `fresh`)."""
        start = 0
        for target, held in fresh.items():
            old = self._by_node.get(target)
            before = old.rows if old is not None else []
            rows = held.rows
            if rows is not before and len(rows) == len(before):
                self._rows[start : start + len(rows)] = rows
                pairs = enumerate(zip(before, rows, strict=True))
                self._changed([start + i for i, (a, b) in pairs if a != b])
            elif rows is not before:
                if before:
                    self.beginRemoveRows(QModelIndex(), start, start + len(before) - 1)
                    del self._rows[start : start + len(before)]
                    self.endRemoveRows()
                if rows:
                    self.beginInsertRows(QModelIndex(), start, start + len(rows) - 1)
                    self._rows[start:start] = rows
                    self.endInsertRows()
            start += len(rows)

    def _changed(self, rows: list[int]) -> None:
        """Say these rows changed, as runs of adjacent rows."""
        last = len(COLUMNS) - 1
        for first, end in _runs(rows):
            self.dataChanged.emit(self.index(first, 0), self.index(end, last))

    def _flagged(self) -> set[tuple[int, str]]:
        """Drifting cells as (id of the row object, column key): they outlive moved rows."""
        return {(id(self._rows[row]), key) for row, key in self._drift}

    def _announce_drift(self, before: set[tuple[int, str]]) -> None:
        """Rows whose cells started or stopped drifting (the majority moved) repaint too."""
        where = {id(row): n for n, row in enumerate(self._rows)}
        moved = before ^ self._flagged()
        self._changed(sorted({where[i] for i, _ in moved if i in where}))

    def on_fleet_changed(self, changes: dict[str, Change]) -> None:
        # Most frames bring only samples: nothing the table shows (a look at each of
        # 1,250 nodes' objects every frame cost 2.7 ms).
        if any(c is Change.STRUCTURE for c in changes.values()) or not all(
            self._holds(target) for target in changes
        ):
            self.refresh()

    def _holds(self, target: str) -> bool:
        """Whether the rows held for the node are from its inventory and identity now."""
        node, held = self._fleet.node(target), self._by_node.get(target)
        if held is None:
            return node.info is None
        return held.info is node.info and held.identity is node.identity

    def rows(self) -> list[InventoryRow]:
        return list(self._rows)

    def drift_count(self) -> int:
        """Differing values, a node's driver counted once however many GPUs it has."""
        return drift_count(self._rows, self._drift)

    def drift(self, row: int, column: int) -> Drift | None:
        return self._drift.get((row, COLUMNS[column].key))

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role not in _ANSWERED or not index.isValid():
            return None
        row, column = index.row(), index.column()
        text = cell_text(self._rows[row], COLUMNS[column].key)
        if role == SORT_ROLE:
            return natural_key(text)
        drift = self.drift(row, column)
        if role == Qt.ItemDataRole.DisplayRole:
            return text
        if role == DRIFT_ROLE:
            return drift is not None
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


class InventoryFilterProxy(SortKeyProxy):
    """Free-text filter over every column; sorts versions and names naturally."""

    def lessThan(self, left: Index, right: Index) -> bool:
        return bool(left.data(SORT_ROLE) < right.data(SORT_ROLE))


def _runs(rows: list[int]) -> list[tuple[int, int]]:
    """Sorted row numbers as (first, last) runs: [1, 2, 3, 7] -> [(1, 3), (7, 7)]."""
    runs: list[tuple[int, int]] = []
    for row in rows:
        if runs and row == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], row)
        else:
            runs.append((row, row))
    return runs
