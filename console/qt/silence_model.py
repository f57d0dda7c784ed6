"""SilenceTableModel: the fleet's silences as rows (a silence on several nodes is one row).

Also SilenceListings, which asks each node for its silences whenever it
(re)connects, and SilenceReminders' Qt side, which says once when an active
silence is about to end.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import (
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    Qt,
    Signal,
)
from PySide6.QtGui import QColor

from console.connections.queries import FleetQueries
from console.fleet.model import Change, FleetModel
from console.fleet.silences import (
    MINUTE_MS,
    SilenceGroup,
    SilenceReminders,
    end_countdown,
    matchers_text,
    reminder_text,
    start_countdown,
)
from console.fleet.updates import LinkState
from console.fleet.wall_clock import unix_now_ms
from console.qt.fleet_table import FleetTableModel
from console.qt.named_timer import named_timer
from console.qt.row_table import SORT_ROLE, EndedRowsProxy
from console.qt.status_inks import Ink, colour
from gpufleet.states import SilenceState

Index = QModelIndex | QPersistentModelIndex
COLUMNS = ("Matchers", "Nodes", "Starts", "Ends", "Author", "Comment", "State", "Silencing")
ENDS, STATE, SILENCING = 3, 6, 7
SILENCE_ROLE = int(Qt.ItemDataRole.UserRole) + 1
# Countdowns move by the minute and states change on the second: a tick a second.
TICK_MS = 1000
# Silences ending this soon are highlighted (before they end, not after).
ENDING_SOON_MS = 10 * MINUTE_MS
ENDING_SOON_COLOR = QColor("#fbd38d")
ENDING_SOON_TEXT = QColor("#1a202c")  # dark on amber, in the light theme and the dark
STATE_INKS = {  # the theme's colours (console/qt/status_inks.py)
    SilenceState.ACTIVE: Ink.GOOD,
    SilenceState.PENDING: Ink.INFO,
    SilenceState.EXPIRED: Ink.MUTED,
}
NAMES_SHOWN = 3


def time_text(unix_ms: int, now_unix_ms: int) -> str:
    """ "14:05" today, "Thu 3 Dec 14:05" on another day."""
    when, now = time.localtime(unix_ms / 1000), time.localtime(now_unix_ms / 1000)
    same_day = (when.tm_year, when.tm_yday) == (now.tm_year, now.tm_yday)
    return time.strftime("%H:%M" if same_day else "%a %d %b %H:%M", when)


class SilenceTableModel(FleetTableModel):
    headers = COLUMNS

    def prepare(self) -> None:
        self._rows: list[SilenceGroup] = []
        self._counts: list[int] = []
        self._version = (-1, -1)
        self._timer = named_timer(
            self, "gpufleet-silence-table-timer", self._on_timer_timeout, interval_ms=TICK_MS
        )
        self._timer.start()

    def group(self, row: int) -> SilenceGroup:
        return self._rows[row]

    def live_count(self) -> int:
        """Silences pending or active now."""
        now = self._clock()
        return sum(1 for g in self._rows if g.state(now) is not SilenceState.EXPIRED)

    def now(self) -> int:
        """The model's clock, ms (the tests set it)."""
        return self._clock()

    def on_fleet_changed(self, _changes: dict[str, Change]) -> None:
        self.refresh()

    def refresh(self) -> None:
        version = (self._fleet.silences.version, self._fleet.alerts.version)
        if version == self._version:
            return
        if version[0] != self._version[0]:
            self.beginResetModel()
            self._rows = self._fleet.silences.groups()
            self._count_silenced()
            self.endResetModel()
        else:  # only alerts moved: the counts may have
            self._count_silenced()
            self._emit_changed(SILENCING, SILENCING)
        self._version = version

    def _count_silenced(self) -> None:
        # One pass over the alerts for every group (SilenceGroup.silencing's count): the
        # alerts change several times a second at fleet scale, each group's own pass
        # over ~900 of them cost groups x alerts every time.
        if not self._rows:
            self._counts = []
            return
        quiet = Counter((a.target, a.silence_id) for a in self._fleet.alerts.alerts() if a.firing)
        self._counts = [sum(quiet[uid] for uid in {r.uid for r in g.rows}) for g in self._rows]

    def _on_timer_timeout(self) -> None:
        self._emit_changed(0, len(COLUMNS) - 1)  # countdowns, states and highlights move on

    def _emit_changed(self, first: int, last: int) -> None:
        if self._rows:
            self.dataChanged.emit(self.index(0, first), self.index(len(self._rows) - 1, last))

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        group, column = self._rows[index.row()], index.column()
        now = self._clock()
        if role == SILENCE_ROLE:
            return group
        if role == Qt.ItemDataRole.DisplayRole:
            return self._text(index.row(), group, column, now)
        if role == SORT_ROLE:
            return self._sort_key(index.row(), group, column)
        ending_soon = group.ending_within(now, ENDING_SOON_MS)
        if role == Qt.ItemDataRole.BackgroundRole and ending_soon:
            return ENDING_SOON_COLOR
        if role == Qt.ItemDataRole.ForegroundRole:
            if ending_soon:
                return ENDING_SOON_TEXT
            return colour(STATE_INKS[group.state(now)]) if column == STATE else None
        if role == Qt.ItemDataRole.ToolTipRole:
            return self._tooltip(group, now)
        return None

    def _text(self, row: int, group: SilenceGroup, column: int, now: int) -> str:
        if column == 0:
            return matchers_text(group.first.matchers)
        if column == 1:
            return self._names(group)
        if column == 2:
            when, countdown = time_text(group.starts_unix_ms, now), start_countdown(group, now)
            return f"{when} · {countdown}" if countdown else when
        if column == ENDS:
            return f"{time_text(group.ends_unix_ms, now)} · {end_countdown(group, now)}"
        if column == 4:
            return group.first.created_by
        if column == 5:
            return group.first.comment
        if column == STATE:
            state = group.state(now).value
            return f"{state} (by {group.expired_by})" if group.expired_by else state
        return str(self._counts[row]) if row < len(self._counts) else ""

    def _names(self, group: SilenceGroup) -> str:
        names = sorted(self._fleet.name_of(t) for t in group.targets)
        if len(names) <= NAMES_SHOWN:
            return ", ".join(names)
        return f"{', '.join(names[:NAMES_SHOWN])} +{len(names) - NAMES_SHOWN}"

    def _sort_key(self, row: int, group: SilenceGroup, column: int) -> Any:
        if column == 2:
            return group.starts_unix_ms
        if column == ENDS:
            return group.ends_unix_ms
        if column == SILENCING and row < len(self._counts):
            return self._counts[row]
        return None

    def _tooltip(self, group: SilenceGroup, now: int) -> str:
        nodes = ", ".join(self._fleet.name_of(t) for t in group.targets)
        created = time_text(group.created_unix_ms, now)
        return f"{matchers_text(group.first.matchers)}\non {nodes}\ncreated {created}"


class SilenceFilterProxy(EndedRowsProxy):
    """Pending and active silences (expired ones on request), filtered by free text."""

    record_role = SILENCE_ROLE

    def __init__(self, clock: Callable[[], int] = unix_now_ms) -> None:
        super().__init__(show_ended=False)
        self._clock = clock

    def has_ended(self, group: SilenceGroup) -> bool:
        return group.state(self._clock()) is SilenceState.EXPIRED


class SilenceListings(QObject):
    """Asks a node for its silences each time it (re)connects; events keep them current."""

    def __init__(
        self, fleet: FleetModel, queries: FleetQueries, parent: QObject | None = None
    ) -> None:
        super().__init__(parent)
        self.setObjectName("gpufleet-silence-listings")
        self._fleet, self._queries = fleet, queries
        self._connected: set[str] = set()

    def on_fleet_changed(self, changes: dict[str, Change]) -> None:
        for target in changes:
            connected = self._fleet.node(target).state is LinkState.CONNECTED
            if connected and target not in self._connected:
                self._fleet.silences.listing_asked(target)
                self._queries.silences(target)
            if connected:
                self._connected.add(target)
            else:
                self._connected.discard(target)


class SilenceReminder(QObject):
    """Says once, a few minutes before an active silence ends, that it will end."""

    reminderDue = Signal(str)  # "Silence of gpu-node-0* throttle by erin ends in 5 min"

    def __init__(
        self,
        fleet: FleetModel,
        clock: Callable[[], int] = unix_now_ms,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)  # owned by the window, like the table's timer
        self.setObjectName("gpufleet-silence-reminder")
        self._fleet, self._clock = fleet, clock
        self.reminders = SilenceReminders()
        self._timer = named_timer(
            self, "gpufleet-silence-reminder-timer", self.check, interval_ms=TICK_MS
        )
        self._timer.start()

    def check(self) -> None:
        now = self._clock()
        names = {n.target: n.name for n in self._fleet}
        for group in self.reminders.due(self._fleet.silences.groups(), now):
            self.reminderDue.emit(reminder_text(group, now, names))
