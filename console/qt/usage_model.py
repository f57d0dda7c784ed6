"""UsageTableModel: the fleet's usage report, every node's QueryUsage merged.

`refresh` asks every connected node for the table's grouping, and for the
user and team groupings the charts need; once all answers are in, rows with
the same key are summed and the KPIs recomputed fleet-wide (console.fleet.usage).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from PySide6.QtCore import QSortFilterProxyModel, Qt

from console.connections.queries import FleetQueries
from console.fleet.model import FleetModel
from console.fleet.query_round import QueryRound
from console.fleet.updates import LinkState
from console.fleet.usage import (
    HOUR,
    FleetKpis,
    NodeUsage,
    UsageQuery,
    UsageRow,
    currency_of,
    fleet_kpis,
    merge_rows,
    usage_csv,
)
from console.qt.query_round_model import QueryRoundTableModel
from console.qt.row_table import SORT_ROLE

CHART_GROUPINGS = ("user", "team")


@dataclass(frozen=True)
class Column:
    header: str
    value: Callable[[UsageRow], float | str]
    text: Callable[[UsageRow], str]


def _hours(name: str) -> Column:
    header = {"gpu_seconds": "GPU-h", "busy_gpu_seconds": "busy GPU-h",
              "reserved_seconds": "reserved h", "reserved_idle_seconds": "reserved idle h",
              "memory_gib_seconds": "GiB-h"}[name]  # fmt: skip
    return Column(header, lambda r: getattr(r, name),
                  lambda r: f"{getattr(r, name) / HOUR:,.2f}")  # fmt: skip


COLUMNS: tuple[Column, ...] = (
    Column("key", lambda r: r.key, lambda r: r.key),
    _hours("gpu_seconds"),
    _hours("busy_gpu_seconds"),
    _hours("memory_gib_seconds"),
    Column("kWh", lambda r: r.energy_joules, lambda r: f"{r.energy_joules / 3.6e6:,.2f}"),
    _hours("reserved_seconds"),
    _hours("reserved_idle_seconds"),
    Column("workloads", lambda r: r.workloads, lambda r: str(r.workloads)),
)


def _money(name: str, header: str) -> Column:
    """A cost column; its header gets the currency. Unpriced rows sort below zero."""

    def value(r: UsageRow) -> float:
        amount = getattr(r, name)
        return -1.0 if amount is None else float(amount)

    def text(r: UsageRow) -> str:
        amount = getattr(r, name)
        return "" if amount is None else f"{amount:,.2f}"

    return Column(header, value, text)


COST_COLUMNS: tuple[Column, ...] = (
    _money("cost", "cost"),
    _money("gpu_cost", "GPU cost"),
    _money("energy_cost", "energy cost"),
    Column("accounts", lambda r: " ".join(r.accounts), lambda r: ", ".join(r.accounts)),
)
ALL_COLUMNS = COLUMNS + COST_COLUMNS


class UsageTableModel(QueryRoundTableModel):
    def __init__(self, fleet: FleetModel, queries: FleetQueries) -> None:
        super().__init__(fleet, queries)
        self.query = UsageQuery()
        self._rows: list[UsageRow] = []
        self.by_grouping: dict[str, list[UsageRow]] = {}
        self.kpis: FleetKpis | None = None
        self.currency = ""  # of the rows' costs: "" without prices, "mixed" for several
        self._asked = UsageQuery()

    def refresh(self, query: UsageQuery) -> bool:
        """Ask every connected node; False when none is connected."""
        round_ = QueryRound()
        groupings = tuple(dict.fromkeys((query.grouping, *CHART_GROUPINGS)))
        for node in self.fleet:
            if node.state is not LinkState.CONNECTED:
                round_.skipped[node.target] = node.state.value
                continue
            for grouping in groupings:
                query_id = round_.expect(node.target, grouping)
                self._queries.usage(node.target, query, grouping, query_id)
        self._asked = query
        return self._ask(round_)

    def _finish(self, round_: QueryRound) -> None:
        query = self._asked
        keys = dict.fromkeys((query.grouping, *CHART_GROUPINGS))
        usages = {key: [cast(NodeUsage, p) for _, p in round_.payloads(key)] for key in keys}
        self.beginResetModel()
        self.query = query
        self.by_grouping = {key: merge_rows(found, key) for key, found in usages.items()}
        self._rows = self.by_grouping[query.grouping]
        self.currency = currency_of(self._rows)
        table = usages[query.grouping]
        self.kpis = fleet_kpis(table) if table else None
        self.endResetModel()
        self._report(self.kpis.text() if self.kpis else "no node answered", round_)

    # -- reading ---------------------------------------------------------------

    def rows(self) -> list[UsageRow]:
        return list(self._rows)

    def csv_text(self) -> str:
        return usage_csv(self._rows, self.query.grouping)

    def header_labels(self) -> list[str]:
        """The grouping's name, then each column's (the priced ones with the currency)."""
        labels = [self.query.grouping]
        for column in ALL_COLUMNS[1:]:
            priced = self.currency and column in COST_COLUMNS[:3]
            labels.append(f"{column.header} {self.currency}" if priced else column.header)
        return labels

    def cell(self, row: UsageRow, column: int, role: int) -> Any:
        shown = ALL_COLUMNS[column]
        if role == Qt.ItemDataRole.DisplayRole:
            return shown.text(row)
        if role == SORT_ROLE:
            return shown.value(row)
        numeric = 0 < column < len(ALL_COLUMNS) - 1  # the accounts are words
        if role == Qt.ItemDataRole.TextAlignmentRole and numeric:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None


class UsageSortProxy(QSortFilterProxyModel):
    """Sorts numbers as numbers (the cells show rounded hours)."""

    def __init__(self) -> None:
        super().__init__()
        self.setSortRole(SORT_ROLE)
