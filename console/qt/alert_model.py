"""AlertTableModel: every node's alerts as rows; AlertFilterProxy: what the panel shows.

"Now" and "Peak" are live where the rule watches a metric the console samples
(console.fleet.alert_values): they move with every frame that brought samples,
not only when the daemon sends a changed alert.
"""

from __future__ import annotations

import bisect
import time
from typing import Any

from PySide6.QtCore import (
    QModelIndex,
    QPersistentModelIndex,
    Qt,
    Signal,
)

from console.fleet.alert_rows import AlertRow
from console.fleet.alert_values import LiveValues, live_metric, live_values
from console.fleet.durations import duration_ms_text
from console.fleet.model import Change, FleetModel, NodeRecord
from console.qt.named_timer import named_timer
from console.qt.row_table import SORT_ROLE, EndedRowsProxy, RowTableModel
from console.qt.status_inks import Ink, colour
from gpufleet.v1.alert_severity import Severity

Index = QModelIndex | QPersistentModelIndex
COLUMNS = ("Severity", "Node", "GPU", "Rule", "Now", "Peak", "Since", "State", "Summary")
NOW, PEAK = 4, 5
ALERT_ROLE = int(Qt.ItemDataRole.UserRole) + 1
REFRESH_MS = 250
# More rows added or removed than this (or a quarter of the table) at once: a reset.
RESET_OVER_ROWS = 64
SEVERITY_INKS = {  # the theme's colours (console/qt/status_inks.py)
    Severity.CRITICAL: Ink.CRITICAL,
    Severity.WARNING: Ink.WARNING,
    Severity.INFO: Ink.INFO,
}


RowKey = tuple[bool, int, int, tuple[str, str]]


def row_key(alert: AlertRow) -> RowKey:
    """The model's row order: firing first, then the worst, the newest; ties by id.

    The proxy's sort is stable: alerts of equal severity keep this order.
    """
    return (not alert.firing, -alert.severity, -alert.started_unix_ms, alert.uid)


def state_text(alert: AlertRow, now_ms: int) -> str:
    if not alert.firing:
        return "cleared"
    parts = ["firing"]
    if alert.acknowledged:
        parts.append(f"ack by {alert.acknowledged_by}")
    if alert.silenced(now_ms):
        left = duration_ms_text((alert.silenced_until_unix_ms or 0) - now_ms)
        by = f" by {alert.silenced_by}" if alert.silenced_by else ""
        parts.append(f"silenced{by} for {left} ({alert.silence_reason})")
    return ", ".join(parts)


def number_text(value: float | None, unit: str) -> str:
    """ "98 °C", "712 W", "512 MiB/min", a small rate to a tenth: "2.4 °C/min"; "" for none."""
    if value is None:
        return ""
    digits = 1 if "/" in unit and abs(value) < 10 else 0
    return f"{value:.{digits}f} {unit}".strip()


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
    record_role = ALERT_ROLE
    # After each refresh that changed rows (a reset or rows updated in place), so
    # views that look at the selected alerts (their buttons) look again.
    refreshed = Signal()

    def __init__(self, fleet: FleetModel) -> None:
        super().__init__()
        self._fleet = fleet
        self._rows: list[AlertRow] = []
        self._keys: list[RowKey] = []  # self._rows' sort keys, ascending
        # Beside each row: its alert's uid, and its node where Now/Peak are live (else "").
        self._uids: list[tuple[str, str]] = []
        self._live_targets: list[str] = []
        self._row_of: dict[tuple[str, str], int] = {}  # uid -> row
        # Rows with a live Now/Peak, by node: what a frame's samples move.
        self._live_rows: dict[str, list[int]] = {}
        # live_metric by what it looks at (rule, unit, a GPU or not): asked for every row.
        self._live_kinds: dict[tuple[str, str, bool], bool] = {}
        self._version = -1
        self._timer = named_timer(
            self, "gpufleet-alert-table-timer", self.refresh, single_shot=True
        )
        # Now/Peak per alert, worked out at most once per frame (sorting asks often).
        self._live: dict[tuple[str, str], LiveValues] = {}
        self.refresh()

    def refresh(self) -> None:
        """Bring the rows up to the alert book: rows updated, added and removed in place.

        A reset made the proxy re-filter and re-sort every alert and the view lose its
        selection; after ten minutes at 1,000 GPUs (~900 alerts, ~3 changes a second)
        it was the biggest single cost of a frame. A large change still resets.
        """
        book = self._fleet.alerts
        if book.version == self._version:
            return
        self._version = book.version
        fresh, held, rows = book.by_uid(), self._row_of, self._rows
        news = [a for uid, a in fresh.items() if (r := held.get(uid)) is None or rows[r] is not a]
        added = [a for a in news if a.uid not in held]
        gone = len(held) - (len(fresh) - len(added))
        gone_rows = [r for uid, r in held.items() if uid not in fresh] if gone else []
        if not news and not gone_rows:
            return
        in_place: list[int] = []  # rows whose alert changed but stays where it sorts
        moved: list[int] = []
        for alert in news:
            row = held.get(alert.uid)
            if row is not None:
                (in_place if _same_place(rows[row], alert) else moved).append(row)
        if len(gone_rows) + 2 * len(moved) + len(added) > max(RESET_OVER_ROWS, len(rows) // 4):
            self._reset(fresh)
        else:
            self._update(fresh, in_place, moved + gone_rows, added)
        self.refreshed.emit()

    def _reset(self, fresh: dict[tuple[str, str], AlertRow]) -> None:
        self.beginResetModel()
        self._live.clear()
        self._rows = sorted(fresh.values(), key=row_key)
        self._keys = [row_key(a) for a in self._rows]
        self._uids = [a.uid for a in self._rows]
        self._live_targets = [self._live_target(a) for a in self._rows]
        self._index_rows()
        self.endResetModel()

    def _update(
        self,
        fresh: dict[tuple[str, str], AlertRow],
        in_place: list[int],
        remove: list[int],
        added: list[AlertRow],
    ) -> None:
        """New values in their rows; rows removed (gone, or to move), then inserted in order."""
        rows = self._rows
        in_place.sort()
        for row in in_place:
            rows[row] = fresh[rows[row].uid]
            self._live.pop(rows[row].uid, None)
        # Severity, node, GPU, rule and start stay (else the row moved): signalled from
        # Now on, the proxy re-sorts nothing while sorted by severity (its default).
        for first, last in _runs(in_place):
            self.dataChanged.emit(self.index(first, NOW), self.index(last, len(COLUMNS) - 1))
        insert = added + [fresh[rows[r].uid] for r in remove if rows[r].uid in fresh]
        for first, last in reversed(_runs(sorted(remove))):
            self.beginRemoveRows(QModelIndex(), first, last)
            for row in range(first, last + 1):
                self._live.pop(rows[row].uid, None)
            del rows[first : last + 1], self._keys[first : last + 1]
            del self._uids[first : last + 1], self._live_targets[first : last + 1]
            self.endRemoveRows()
        for alert in sorted(insert, key=row_key):
            key = row_key(alert)
            row = bisect.bisect_right(self._keys, key)
            self.beginInsertRows(QModelIndex(), row, row)
            rows.insert(row, alert)
            self._keys.insert(row, key)
            self._uids.insert(row, alert.uid)
            self._live_targets.insert(row, self._live_target(alert))
            self.endInsertRows()
        if remove or insert:
            self._index_rows()

    def _index_rows(self) -> None:
        """Each alert's row, and the rows with a live Now/Peak by node (after rows moved)."""
        self._row_of = dict(zip(self._uids, range(len(self._uids)), strict=True))
        self._live_rows = {}
        for row, target in enumerate(self._live_targets):
            if target:
                self._live_rows.setdefault(target, []).append(row)

    def _live_target(self, alert: AlertRow) -> str:
        """The alert's node if its Now/Peak are live, else ""."""
        kind = (alert.rule, alert.unit, alert.gpu_index is None)
        live = self._live_kinds.get(kind)
        if live is None:
            live = self._live_kinds[kind] = live_metric(alert) is not None
        return alert.target if live else ""

    def on_fleet_changed(self, changes: dict[str, Change]) -> None:
        # A storm changes alerts several times a second; a refresh per frame was the
        # pump's biggest cost after ten minutes: at most every REFRESH_MS.
        if self._fleet.alerts.version != self._version and not self._timer.isActive():
            self._timer.start(REFRESH_MS)
        # The live columns only, of the rows whose node sent samples: every changed
        # row is re-filtered by the proxy, so a fleet-wide signal costs per frame.
        moved = sorted(r for t in changes for r in self._live_rows.get(t, ()))
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

    def cell(self, alert: AlertRow, column: int, role: int) -> Any:
        if role == SORT_ROLE:
            return self._sort_key(alert, column)
        if role == Qt.ItemDataRole.DisplayRole:
            return self._text(alert, column)
        if role == Qt.ItemDataRole.ForegroundRole and column == 0:
            return colour(SEVERITY_INKS.get(alert.severity))
        if role == Qt.ItemDataRole.ToolTipRole:
            return self._tooltip(alert, column)
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


def _same_place(old: AlertRow, new: AlertRow) -> bool:
    """Whether `new` can replace `old` in its row: the same sort key and the same
    columns before Now (the only ones an update in place does not signal)."""
    return row_key(old) == row_key(new) and (old.gpu_index, old.rule) == (new.gpu_index, new.rule)


def _runs(rows: list[int]) -> list[tuple[int, int]]:
    """Ascending row numbers as (first, last) runs of consecutive ones."""
    runs: list[tuple[int, int]] = []
    for row in rows:
        if runs and runs[-1][1] == row - 1:
            runs[-1] = (runs[-1][0], row)
        else:
            runs.append((row, row))
    return runs


class AlertFilterProxy(EndedRowsProxy):
    """Firing alerts (and cleared ones on request), filtered by free text."""

    record_role = ALERT_ROLE

    def __init__(self) -> None:
        super().__init__(show_ended=False)

    def has_ended(self, alert: AlertRow) -> bool:
        return not alert.firing
