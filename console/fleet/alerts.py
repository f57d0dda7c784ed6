"""Alerts and events as the console holds them: plain data, no Qt.

The daemon is the source of truth; the console mirrors each node's alerts
(from ListAlerts, then the event stream) and keeps the events it has seen,
each once, by (node, sequence number).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from console.fleet.alert_rows import AlertRow
from console.fleet.control import ReservationRow, WorkloadRow
from console.fleet.health import GpuCondition, HealingRow
from console.fleet.silences import SilenceRow
from gpufleet.v1.alert_severity import Severity


@dataclass(frozen=True)
class EventRow:
    target: str
    seq: int
    time_unix_ms: int
    kind: str  # "alert_raised", "gpu_lost", ... (EventKind without its prefix, lower case)
    gpu_index: int | None
    summary: str
    actor: str
    alert: AlertRow | None
    replayed: bool
    # For reservation and workload events: the record as it is after the event.
    reservation: ReservationRow | None = None
    workload: WorkloadRow | None = None
    # For silence events: the silence as it is after the event.
    silence: SilenceRow | None = None
    # For GPU health and drain events: the GPU's condition after the event.
    condition: GpuCondition | None = None
    # For healing events: what self-healing did, or in dry-run would have done.
    healing: HealingRow | None = None


# Cleared alerts kept per node, the oldest dropped first: as many as a node's listing
# gives at connect (console.connections.node_link.CLEARED_HISTORY). Unbounded, a 24x7
# console's book, and every view over it, grew by each alert ever cleared (~2 a second
# at 1,000 simulated GPUs: 1,674 held after ten minutes).
MAX_CLEARED_PER_NODE = 200


class AlertBook:
    """Every node's alerts and the events seen, de-duplicated by sequence number."""

    def __init__(self, max_events: int = 5000, max_cleared: int = MAX_CLEARED_PER_NODE) -> None:
        self._alerts: dict[tuple[str, str], AlertRow] = {}
        # Per node, its cleared alerts in the order they cleared (dict as ordered set).
        self._cleared: dict[str, dict[tuple[str, str], None]] = {}
        self._max_cleared = max_cleared
        self._events: list[EventRow] = []
        self._seen: dict[str, tuple[str, int]] = {}  # target -> (journal id, last seq)
        self._local: set[tuple[str, str]] = set()  # alerts the console raised itself
        self._max_events = max_events
        self.version = 0  # bumped on every change, so views know when to refresh

    # -- queries -------------------------------------------------------------

    def alerts(self) -> list[AlertRow]:
        return list(self._alerts.values())

    def by_uid(self) -> dict[tuple[str, str], AlertRow]:
        """Every alert by its `uid`, in the order they came: a copy."""
        return dict(self._alerts)

    def alert(self, target: str, alert_id: str) -> AlertRow | None:
        return self._alerts.get((target, alert_id))

    def events(self) -> list[EventRow]:
        return list(self._events)

    def last_seq(self, target: str, journal_id: str) -> int | None:
        """The last sequence number seen from this journal, or None if it is new to us."""
        seen = self._seen.get(target)
        return seen[1] if seen and seen[0] == journal_id else None

    def active(self, now_unix_ms: int) -> Iterator[AlertRow]:
        """Firing alerts that are not silenced."""
        return (a for a in self._alerts.values() if a.firing and not a.silenced(now_unix_ms))

    def worst_by_gpu(self, now_unix_ms: int) -> dict[tuple[str, int | None], Severity]:
        """Highest active severity per (node, GPU index or None for node alerts)."""
        worst: dict[tuple[str, int | None], Severity] = {}
        for alert in self.active(now_unix_ms):
            key = (alert.target, alert.gpu_index)
            worst[key] = max(worst.get(key, Severity.INFO), alert.severity)
        return worst

    # -- changes -------------------------------------------------------------

    def replace_node_alerts(
        self, target: str, alerts: Iterable[AlertRow], journal_id: str, last_seq: int
    ) -> None:
        """A fresh listing from a node: it replaces what we held for that node."""
        for key in [k for k in self._alerts if k[0] == target and k not in self._local]:
            del self._alerts[key]
        self._alerts.update((a.uid, a) for a in alerts)
        local = [self._alerts[k] for k in self._cleared.get(target, {}) if k in self._local]
        self._cleared.pop(target, None)
        for alert in sorted([*local, *alerts], key=lambda a: a.cleared_unix_ms or 0):
            self._note(alert)
        previous = self._seen.get(target)
        if previous is None or previous[0] != journal_id:
            self._seen[target] = (journal_id, last_seq)
        self.version += 1

    def add_event(self, event: EventRow, journal_id: str) -> bool:
        """Record an event once; returns False for one already seen."""
        seen = self._seen.get(event.target)
        if seen is not None and seen[0] == journal_id and event.seq <= seen[1]:
            return False
        self._seen[event.target] = (journal_id, event.seq)
        self._events.append(event)
        del self._events[: -self._max_events]
        if event.alert is not None:
            self._alerts[event.alert.uid] = event.alert
            self._note(event.alert)
        self.version += 1
        return True

    def _note(self, alert: AlertRow) -> None:
        """Keep the node's cleared alerts in clearing order; drop the oldest past the cap."""
        cleared = self._cleared.setdefault(alert.target, {})
        cleared.pop(alert.uid, None)
        if alert.firing:
            return
        cleared[alert.uid] = None
        while len(cleared) > self._max_cleared:
            oldest = next(iter(cleared))
            del cleared[oldest]
            self._alerts.pop(oldest, None)
            self._local.discard(oldest)  # the console's own: one per outage, each kept

    def add_local_event(self, event: EventRow) -> None:
        """An event of an alert the console raised itself (console.fleet.not_responding).

        It is no part of the node's journal: it leaves the node's resume point
        alone, and the node's next alert listing keeps its alert.
        """
        self._events.append(event)
        del self._events[: -self._max_events]
        if event.alert is not None:
            self._alerts[event.alert.uid] = event.alert
            self._local.add(event.alert.uid)
            self._note(event.alert)
        self.version += 1

    def put_local(self, alert: AlertRow) -> None:
        """A new value of one of the console's own alerts, no news (how long a node is quiet)."""
        if alert.uid in self._local:
            self._alerts[alert.uid] = alert
            self.version += 1
