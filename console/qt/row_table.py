"""RowTableModel: the shared part of the console's flat tables (rows under fixed headers)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    QPersistentModelIndex,
    QSortFilterProxyModel,
    Qt,
)

Index = QModelIndex | QPersistentModelIndex
# A column's sort key where its text does not sort right (numbers, times, severities).
SORT_ROLE = int(Qt.ItemDataRole.UserRole) + 2


class RowTableModel(QAbstractTableModel):
    """Rows in `self._rows`, one column per header label; subclasses give cell()."""

    headers: Sequence[str] = ()
    # The role that answers a row's record itself (e.g. the AlertRow); None: no role does.
    record_role: int | None = None

    def __init__(self) -> None:
        super().__init__()
        self._rows: Sequence[Any] = []

    def _show_rows(self, rows: Sequence[Any]) -> None:
        """Show `rows` instead (a reset), unless they are the rows shown."""
        if tuple(rows) != tuple(self._rows):
            self.beginResetModel()
            self._rows = rows
            self.endResetModel()

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        record = self._rows[index.row()]
        if role == self.record_role:
            return record
        return self.cell(record, index.column(), role)

    def cell(self, record: Any, column: int, role: int) -> Any:
        """What `role` asks of `record`'s cell in `column`; None where it has nothing."""
        return None

    def header_labels(self) -> Sequence[str]:
        return self.headers

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.header_labels())

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = 0) -> Any:
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return self.header_labels()[section]
        return None


class SortKeyProxy(QSortFilterProxyModel):
    """Free-text filter over every column; sorts by SORT_ROLE where both rows have one."""

    def __init__(self) -> None:
        super().__init__()
        self.setFilterCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.setFilterKeyColumn(-1)

    @contextmanager
    def _filter_change(self) -> Iterator[None]:
        """Change what filterAcceptsRow reads inside; the rows are filtered again after."""
        self.beginFilterChange()  # Qt 6.10: invalidateFilter() is deprecated
        try:
            yield
        finally:
            self.endFilterChange(QSortFilterProxyModel.Direction.Rows)

    def lessThan(self, left: Index, right: Index) -> bool:
        a, b = left.data(SORT_ROLE), right.data(SORT_ROLE)
        if a is not None and b is not None:
            return bool(a < b)
        return str(left.data()) < str(right.data())


class EndedRowsProxy(SortKeyProxy):
    """SortKeyProxy over the rows still in force, and the ended ones too on request (a
    panel's "Show cleared", "Show ended", "Show expired"); subclasses say which have ended."""

    # The role that answers a row's record (the source model's record_role).
    record_role: int

    def __init__(self, show_ended: bool) -> None:
        super().__init__()
        self.show_ended = show_ended

    def set_show_ended(self, show: bool) -> None:
        with self._filter_change():
            self.show_ended = show

    def has_ended(self, record: Any) -> bool:
        raise NotImplementedError

    def filterAcceptsRow(self, source_row: int, source_parent: Index) -> bool:
        if not self.show_ended:
            record = self.sourceModel().index(source_row, 0, source_parent).data(self.record_role)
            if self.has_ended(record):
                return False
        return super().filterAcceptsRow(source_row, source_parent)
