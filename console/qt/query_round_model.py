"""QueryRoundTableModel: a report table rebuilt from one round of queries to the nodes.

The audit log and the usage report are queries, not streams: `refresh` asks the
nodes, the answers come back through the frame pump, and the table is rebuilt
once the round's last answer is in.
"""

from __future__ import annotations

from PySide6.QtCore import Signal

from console.connections.queries import FleetQueries
from console.fleet.model import FleetModel
from console.fleet.query_round import QueryRound
from console.fleet.updates import QueryResult
from console.qt.row_table import RowTableModel


class QueryRoundTableModel(RowTableModel):
    """Rows from the last round asked; a subclass asks (`_ask`) and merges (`_finish`)."""

    # A line for the panel: what the round read, and which nodes it does not include.
    refreshed = Signal(str)

    def __init__(self, fleet: FleetModel, queries: FleetQueries) -> None:
        super().__init__()
        self.fleet, self._queries = fleet, queries
        self._round: QueryRound | None = None

    @property
    def busy(self) -> bool:
        return self._round is not None and not self._round.done

    def node_name(self, target: str) -> str:
        return self.fleet.name_of(target)

    def _ask(self, round_: QueryRound) -> bool:
        """Wait for the answers `round_` expects; False when it expects none."""
        self._round = round_
        if round_.done:
            self._finish(round_)
        return bool(round_.pending)

    def on_query_finished(self, result: QueryResult) -> None:
        round_ = self._round
        if round_ is not None and round_.take(result) and round_.done:
            self._finish(round_)

    def _finish(self, round_: QueryRound) -> None:
        """Rebuild the rows from the round's answers, then `_report` how it went."""
        raise NotImplementedError

    def _report(self, text: str, round_: QueryRound) -> None:
        problems = round_.problems(self.node_name)
        self.refreshed.emit(text + (f" · not included: {problems}" if problems else ""))
