"""AlertTableModel: every node's alerts as rows; AlertFilterProxy: what the panel shows.

"Now" and "Peak" are live where the rule watches a metric the console samples
(console.fleet.alert_values): they move with every frame that brought samples,
not only when the daemon sends a changed alert.
"""

from __future__ import annotations

import time
from typing import Any

from PySide6.QtCore import (
    QModelIndex,
    QPersistentModelIndex,
    QSortFilterProxyModel,
    Qt,
    QTimer,
)
from PySide6.QtGui import QColor

from console.fleet.alert_values import LiveValues, live_metric, live_values
from console.fleet.alerts import AlertRow, Severity
from console.fleet.model import Change, FleetModel, NodeRecord
from console.fleet.silences import duration_text
from console.qt.row_table import SORT_ROLE, RowTableModel, SortKeyProxy

Index = QModelIndex | QPersistentModelIndex
COLUMNS = ("Severity", "Node", "GPU", "Rule", "Now", "Peak", "Since", "State", "Summary")
NOW, PEAK = 4, 5
ALERT_ROLE = int(Qt.ItemDataRole.UserRole) + 1
REFRESH_MS = 250
SEVERITY_COLORS = {
    Severity.CRITICAL: QColor("#c53030"),
    Severity.WARNING: QColor("#b7791f"),
    Severity.INFO: QColor("#2b6cb0"),
}


def state_text(alert: AlertRow, now_ms: int) -> str:
    if not alert.firing:
        return "cleared"
    parts = ["firing"]
    if alert.acknowledged:
        parts.append(f"ack by {alert.acknowledged_by}")
    if alert.silenced(now_ms):
        left = duration_text((alert.silenced_until_unix_ms or 0) - now_ms)
        by = f" by {alert.silenced_by}" if alert.silenced_by else ""
        parts.append(f"silenced{by} for {left} ({alert.silence_reason})")
    return ", ".join(parts)


def number_text(value: float | None, unit: str) -> str:
    """ "98 °C", "712 W"; "" when there is no value."""
    return "" if value is None else f"{value:.0f} {unit}".strip()


def value_text(alert: AlertRow, value: float | None = None) -> str:
    """The alert's value (or `value`, its live one) with unit and count."""
    shown = alert.value if value is None else value
    if shown is None:
        return ""
    count = f" x{alert.occurrences}" if alert.occurrences > 1 else ""
    if alert.unit == "xid":  # the value is the code: "Xid 13", not "13 xid"
        return f"Xid {shown:.0f}{count}"
    return f"{number_text(shown, alert.unit)}{count}"


def peak_text(alert: AlertRow, peak: float | None) -> str:
    # An Xid's "peak" would be its highest code: no measure of anything.
    return "" if alert.unit == "xid" else number_text(peak, alert.unit)


class AlertTableModel(RowTableModel):
    headers = COLUMNS

    def __init__(self, fleet: FleetModel) -> None:
        super().__init__()
        self._fleet = fleet
        self._rows: list[AlertRow] = []
        self._version = -1
        self._timer = QTimer(self)
        self._timer.setObjectName("gpufleet-alert-table-timer")
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self.refresh)
        # Now/Peak per alert, worked out at most once per frame (sorting asks often).
        self._live: dict[tuple[str, str], LiveValues] = {}
        self.refresh()

    def refresh(self) -> None:
        if self._fleet.alerts.version == self._version:
            return
        self.beginResetModel()
        self._live.clear()
        self._version = self._fleet.alerts.version
        self._rows = sorted(
            self._fleet.alerts.alerts(),
            key=lambda a: (not a.firing, -a.severity, -a.started_unix_ms),
        )
        self.endResetModel()

    def on_fleet_changed(self, changes: dict[str, Change]) -> None:
        # A storm changes alerts several times a second; a reset (re-sort,
        # re-filter) per frame was the pump's biggest cost after ten minutes.
        if self._fleet.alerts.version != self._version and not self._timer.isActive():
            self._timer.start(REFRESH_MS)
        # The live columns only, of the rows whose node sent samples: every changed
        # row is re-filtered by the proxy, so a fleet-wide signal costs per frame.
        moved = [r for r, a in enumerate(self._rows)
                 if a.target in changes and live_metric(a) is not None]  # fmt: skip
        for first, last in _runs(moved):
            for row in range(first, last + 1):
                self._live.pop(self._rows[row].uid, None)
            self.dataChanged.emit(self.index(first, NOW), self.index(last, PEAK))

    def live(self, alert: AlertRow) -> LiveValues:
        """The alert's Now and Peak as of this frame."""
        found = self._live.get(alert.uid)
        if found is None:
            try:
                node: NodeRecord | None = self._fleet.node(alert.target)
            except KeyError:  # a node no longer watched
                node = None
            found = self._live[alert.uid] = live_values(alert, node)
        return found

    def alert(self, row: int) -> AlertRow:
        return self._rows[row]

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        alert = self._rows[index.row()]
        if role == ALERT_ROLE:
            return alert
        if role == SORT_ROLE:
            return self._sort_key(alert, index.column())
        if role == Qt.ItemDataRole.DisplayRole:
            return self._text(alert, index.column())
        if role == Qt.ItemDataRole.ForegroundRole and index.column() == 0:
            return SEVERITY_COLORS.get(alert.severity)
        if role == Qt.ItemDataRole.ToolTipRole:
            return self._tooltip(alert, index.column())
        return None

    def _tooltip(self, alert: AlertRow, column: int) -> str:
        if column in (NOW, PEAK) and live_metric(alert) is not None:
            live = self.live(alert).live
            source = "live, from the console's samples" if live else "the daemon's last value"
            return f"{alert.summary}\n{COLUMNS[column]}: {source}"
        return alert.summary

    def _text(self, alert: AlertRow, column: int) -> str:
        now_ms = int(time.time() * 1000)
        node = self._node_name(alert.target)
        since = time.strftime("%H:%M:%S", time.localtime(alert.started_unix_ms / 1000))
        gpu = "" if alert.gpu_index is None else str(alert.gpu_index)
        if column in (NOW, PEAK):
            live = self.live(alert)
            return value_text(alert, live.now) if column == NOW else peak_text(alert, live.peak)
        cells = (
            alert.severity.label.upper(), node, gpu, alert.rule, "", "", since,
            state_text(alert, now_ms), alert.summary,
        )  # fmt: skip
        return cells[column]

    def _node_name(self, target: str) -> str:
        return self._fleet.name_of(target)

    def _sort_key(self, alert: AlertRow, column: int) -> Any:
        if column == 0:
            return int(alert.severity)
        if column == 2:
            return -1 if alert.gpu_index is None else alert.gpu_index
        if column in (NOW, PEAK):
            live = self.live(alert)
            found = live.now if column == NOW else live.peak
            return found if found is not None else float("-inf")
        if column == 6:
            return alert.started_unix_ms
        return None


def _runs(rows: list[int]) -> list[tuple[int, int]]:
    """Ascending row numbers as (first, last) runs of consecutive ones."""
    runs: list[tuple[int, int]] = []
    for row in rows:
        if runs and runs[-1][1] == row - 1:
            runs[-1] = (runs[-1][0], row)
        else:
            runs.append((row, row))
    return runs


class AlertFilterProxy(SortKeyProxy):
    """Firing alerts (and cleared ones on request), filtered by free text."""

    def __init__(self) -> None:
        super().__init__()
        self.show_cleared = False
        self.setFilterCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.setFilterKeyColumn(-1)

    def set_show_cleared(self, show: bool) -> None:
        self.beginFilterChange()  # Qt 6.10: invalidateFilter() is deprecated
        self.show_cleared = show
        self.endFilterChange(QSortFilterProxyModel.Direction.Rows)

    def filterAcceptsRow(self, source_row: int, source_parent: Index) -> bool:
        source = self.sourceModel()
        alert = source.index(source_row, 0, source_parent).data(ALERT_ROLE)
        if not self.show_cleared and not alert.firing:
            return False
        return super().filterAcceptsRow(source_row, source_parent)
