"""Matcher silences as the console holds them: plain data, no Qt.

Each node keeps its own silences (the daemon is the source of truth); the
console mirrors them per node (ListSilences at every connect, then the
SILENCE_* events). One silence sent from the console to several nodes becomes
one silence on each; `SilenceBook.groups()` puts them back together as one row
(same matchers, end, author and comment).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from console.fleet.alert_rows import AlertRow
from console.fleet.durations import duration_ms_text
from gpufleet.states import SilenceState, silence_state
from gpufleet.v1.silence_globs import glob_matches

# Matcher labels the console offers (the daemon knows more: UUID, pid, its own labels).
NODE, ALERTNAME, GPU, SEVERITY = "node", "alertname", "gpu", "severity"
MINUTE_MS = 60_000


@dataclass(frozen=True)
class SilenceMatcher:
    label: str
    pattern: str

    def matches(self, labels: Mapping[str, str]) -> bool:
        """An alert without the label never matches (as the daemon judges it)."""
        value = labels.get(self.label)
        return value is not None and glob_matches(self.pattern, value)

    @property
    def text(self) -> str:
        return f"{self.label}={self.pattern}"


def matchers_text(matchers: Iterable[SilenceMatcher]) -> str:
    """ "node=gpu-node-0* alertname=throttle"."""
    return " ".join(m.text for m in matchers)


def alert_labels(alert: AlertRow, node_name: str) -> dict[str, str]:
    """The labels of an alert that the console's matchers name (the daemon has more)."""
    labels = {NODE: node_name, ALERTNAME: alert.rule, SEVERITY: alert.severity.label}
    if alert.gpu_index is not None:
        labels[GPU] = str(alert.gpu_index)
    return labels


@dataclass(frozen=True)
class SilenceRow:
    target: str  # the node's HOST:PORT
    id: str
    matchers: tuple[SilenceMatcher, ...]
    starts_unix_ms: int
    ends_unix_ms: int
    created_by: str
    comment: str
    created_unix_ms: int
    expired_by: str = ""  # who ended it early (ends_unix_ms is then when)

    @property
    def uid(self) -> tuple[str, str]:
        """Unique across the fleet: silence ids are unique per node."""
        return self.target, self.id

    def state(self, now_unix_ms: int) -> SilenceState:
        return silence_state(self.starts_unix_ms, self.ends_unix_ms, now_unix_ms)

    def pattern(self, label: str) -> str | None:
        return next((m.pattern for m in self.matchers if m.label == label), None)


@dataclass(frozen=True)
class SilenceListing:
    """A node's ListSilences answer (the payload of its QueryResult)."""

    target: str
    rows: tuple[SilenceRow, ...]


def _further_along(held: SilenceRow, new: SilenceRow) -> SilenceRow:
    """Of two records of one silence, the later in its life.

    A silence only ever ends earlier (expired by a person), never later, so an
    event or listing that arrives late cannot bring an expired silence back.
    """
    if (new.ends_unix_ms, not new.expired_by) < (held.ends_unix_ms, not held.expired_by):
        return new
    return held


# Copies of one silence on several nodes are created within moments of each other.
SAME_SILENCE_MS = 60_000


@dataclass(frozen=True)
class SilenceGroup:
    """One silence as a person made it: the same silence on one or more nodes."""

    rows: tuple[SilenceRow, ...]

    @property
    def first(self) -> SilenceRow:
        return self.rows[0]

    @property
    def key(self) -> tuple[str, str]:
        return self.first.uid

    @property
    def targets(self) -> tuple[str, ...]:
        return tuple(r.target for r in self.rows)

    @property
    def starts_unix_ms(self) -> int:
        return min(r.starts_unix_ms for r in self.rows)

    @property
    def ends_unix_ms(self) -> int:
        return max(r.ends_unix_ms for r in self.rows)

    @property
    def created_unix_ms(self) -> int:
        return self.first.created_unix_ms

    @property
    def expired_by(self) -> str:
        return ", ".join(dict.fromkeys(r.expired_by for r in self.rows if r.expired_by))

    def state(self, now_unix_ms: int) -> SilenceState:
        states = {r.state(now_unix_ms) for r in self.rows}
        for state in (SilenceState.ACTIVE, SilenceState.PENDING):
            if state in states:
                return state
        return SilenceState.EXPIRED

    def unexpired(self, now_unix_ms: int) -> tuple[SilenceRow, ...]:
        return tuple(r for r in self.rows if r.state(now_unix_ms) is not SilenceState.EXPIRED)

    def silencing(self, alerts: Iterable[AlertRow]) -> int:
        """How many firing alerts these silences keep quiet now (the daemons' word)."""
        uids = {r.uid for r in self.rows}
        return sum(1 for a in alerts if a.firing and (a.target, a.silence_id) in uids)

    def ending_within(self, now_unix_ms: int, window_ms: int) -> bool:
        """Active and ending within the window: what the view highlights."""
        left = self.ends_unix_ms - now_unix_ms
        return self.state(now_unix_ms) is SilenceState.ACTIVE and 0 < left <= window_ms


def group_silences(rows: Iterable[SilenceRow]) -> list[SilenceGroup]:
    """Copies of one silence on several nodes as one group, newest first.

    Copies share matchers, author and comment and were created together; their
    ends may differ once one node's copy was expired.
    """
    open_: dict[tuple[object, ...], list[SilenceRow]] = {}
    groups: list[list[SilenceRow]] = []
    for row in sorted(rows, key=lambda r: (r.created_unix_ms, r.target)):
        base = (row.matchers, row.created_by, row.comment)
        group = open_.get(base)
        fits = group is not None and all(r.target != row.target for r in group)
        if (
            group is None
            or not fits
            or row.created_unix_ms - group[0].created_unix_ms > SAME_SILENCE_MS
        ):
            group = open_[base] = []
            groups.append(group)
        group.append(row)
    return [SilenceGroup(tuple(g)) for g in reversed(groups)]


class SilenceBook:
    """Every node's silences, kept current by listings and events."""

    def __init__(self) -> None:
        self._rows: dict[tuple[str, str], SilenceRow] = {}
        # When each silence was last learned, and when each node's listing was asked:
        # a silence learned after the ask may be newer than the listing that answers it.
        self._learned: dict[tuple[str, str], int] = {}
        self._asked: dict[str, int] = {}
        self._clock = 0
        self.version = 0  # bumped on every change, so views know when to refresh

    def silences(self) -> list[SilenceRow]:
        return list(self._rows.values())

    def silence(self, target: str, silence_id: str) -> SilenceRow | None:
        return self._rows.get((target, silence_id))

    def groups(self) -> list[SilenceGroup]:
        """Silences grouped by what a person asked for, newest first."""
        return group_silences(self._rows.values())

    def listing_asked(self, target: str) -> None:
        """A ListSilences was sent to the node: what is learned from now on may be newer."""
        self._clock += 1
        self._asked[target] = self._clock

    def replace_node(self, target: str, rows: Iterable[SilenceRow]) -> None:
        """A node's listing replaces what we held, but for silences learned since it was asked."""
        asked = self._asked.get(target, self._clock)
        listed = {r.uid: r for r in rows}
        for uid in [u for u in self._rows if u[0] == target and u not in listed]:
            if self._learned.get(uid, 0) <= asked:
                del self._rows[uid]
                self._learned.pop(uid, None)
        for row in listed.values():
            held = self._rows.get(row.uid)
            self._rows[row.uid] = row if held is None else _further_along(held, row)
        self.version += 1

    def apply(self, row: SilenceRow) -> bool:
        """A silence from an event or an answer; returns False when it told us nothing new."""
        held = self._rows.get(row.uid)
        if held is not None and _further_along(held, row) is held:
            return False
        self._clock += 1
        self._rows[row.uid], self._learned[row.uid] = row, self._clock
        self.version += 1
        return True


class SilenceReminders:
    """Which active silences should be announced as ending soon: each once.

    A silence shorter than the lead time was meant to be short: no reminder.
    """

    def __init__(self, lead_ms: int = 5 * MINUTE_MS) -> None:
        self.lead_ms = lead_ms
        self._reminded: set[tuple[str, str]] = set()

    def due(self, groups: Iterable[SilenceGroup], now_unix_ms: int) -> list[SilenceGroup]:
        found = []
        for group in groups:
            long_enough = group.ends_unix_ms - group.starts_unix_ms > self.lead_ms
            fresh = group.key not in self._reminded
            if long_enough and fresh and group.ending_within(now_unix_ms, self.lead_ms):
                self._reminded.add(group.key)
                found.append(group)
        return found


def start_countdown(group: SilenceGroup, now_unix_ms: int) -> str:
    """ "in 2 h" for a silence not begun yet; "" once it has."""
    if group.state(now_unix_ms) is SilenceState.PENDING:
        return f"in {duration_ms_text(group.starts_unix_ms - now_unix_ms)}"
    return ""


def end_countdown(group: SilenceGroup, now_unix_ms: int) -> str:
    """ "lasts 4 h" (not begun), "ends in 12 min", "ended 5 min ago"."""
    state = group.state(now_unix_ms)
    if state is SilenceState.PENDING:
        return f"lasts {duration_ms_text(group.ends_unix_ms - group.starts_unix_ms)}"
    if state is SilenceState.ACTIVE:
        return f"ends in {duration_ms_text(group.ends_unix_ms - now_unix_ms)}"
    return f"ended {duration_ms_text(now_unix_ms - group.ends_unix_ms)} ago"


def what_text(group: SilenceGroup, name_of: Mapping[str, str] | None = None) -> str:
    """What a silence is about, in few words: "gpu-node-0* throttle", "gpu-node-3 gpu=2"."""
    row = group.first
    node = row.pattern(NODE)
    if node is None:
        names = [(name_of or {}).get(t, t) for t in group.targets]
        node = ", ".join(names)
    rule = row.pattern(ALERTNAME)
    rest = [m.text for m in row.matchers if m.label not in (NODE, ALERTNAME)]
    return " ".join(p for p in (node, rule, *rest) if p)


def reminder_text(group: SilenceGroup, now_unix_ms: int, name_of: Mapping[str, str]) -> str:
    """ "Silence of gpu-node-0* throttle by erin ends in 5 min"."""
    left = duration_ms_text(group.ends_unix_ms - now_unix_ms)
    return f"Silence of {what_text(group, name_of)} by {group.first.created_by} ends in {left}"
