"""AuditTableModel: the audit records of every node we are admin on, newest first.

`refresh` asks the nodes (QueryAudit is a query, not a stream); the answers
come back through the frame pump, and the table is rebuilt once all are in.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import (
    QModelIndex,
    QPersistentModelIndex,
    QSortFilterProxyModel,
    Qt,
)

from console.connections.queries import FleetQueries
from console.fleet.audit import COLUMNS, AuditFilter, AuditRow, audit_csv, merge_audit
from console.fleet.model import FleetModel
from console.fleet.query_round import QueryRound
from console.fleet.updates import LinkState
from console.qt.query_round_model import QueryRoundTableModel
from gpufleet.policy import role_needed

Index = QModelIndex | QPersistentModelIndex
RECORD_ROLE = int(Qt.ItemDataRole.UserRole) + 1  # the AuditRow of the row
SORT_ROLE = int(Qt.ItemDataRole.UserRole) + 2


class AuditTableModel(QueryRoundTableModel):
    headers = tuple(c.header for c in COLUMNS)
    record_role = RECORD_ROLE

    def __init__(self, fleet: FleetModel, queries: FleetQueries) -> None:
        super().__init__(fleet, queries)
        self._rows: list[AuditRow] = []

    # -- asking ----------------------------------------------------------------

    def refresh(self, wanted: AuditFilter) -> bool:
        """Ask every chosen node we are admin on; False when there is none to ask."""
        round_ = QueryRound()
        for node in self.fleet:
            if wanted.targets and node.target not in wanted.targets:
                continue
            refusal = self.fleet.role_refusal(node.target, role_needed("QueryAudit"), live=True)
            if node.state is not LinkState.CONNECTED:
                round_.skipped[node.target] = node.state.value
            elif refusal is not None:
                round_.skipped[node.target] = refusal
            else:
                self._queries.audit(node.target, wanted, round_.expect(node.target))
        return self._ask(round_)

    def _finish(self, round_: QueryRound) -> None:
        pages = [payload for _, payload in round_.payloads()]
        self.beginResetModel()
        self._rows = merge_audit(pages)  # type: ignore[arg-type]
        self.endResetModel()
        nodes = len(round_.answers)
        self._report(f"{len(self._rows)} records from {nodes} node{'s' * (nodes != 1)}", round_)

    # -- reading ---------------------------------------------------------------

    def rows(self) -> list[AuditRow]:
        return list(self._rows)

    def csv_text(self) -> str:
        return audit_csv(self._rows, self.node_name)

    def cell(self, row: AuditRow, column: int, role: int) -> Any:
        if role == SORT_ROLE:
            return row.time_unix_ms if column == 0 else self._text(row, column)
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole):
            return self._text(row, column)
        return None

    def _text(self, row: AuditRow, column: int) -> str:
        return COLUMNS[column].text(row, self.node_name(row.target))


class AuditFilterProxy(QSortFilterProxyModel):
    """Free text over every column; time sorts by time, not by its text."""

    def __init__(self) -> None:
        super().__init__()
        self.setFilterCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.setFilterKeyColumn(-1)
        self.setSortRole(SORT_ROLE)
