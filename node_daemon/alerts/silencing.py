"""Silencing: which silence keeps each alert quiet, from the node's silences.

An alert is quiet under its own silence (SilenceAlert) or under the active
matcher silences that cover its Alertmanager labels (the node's labels and the
alert's, as node_daemon.alerts.alertmanager.alert_labels builds them), whichever
ends last; a tie goes to the matcher silence, which every console lists. The
alert's silenced_* fields then repeat that silence's end, author and comment,
and silence_id names a matcher silence.

Not thread-safe: the AlertEngine calls it under its lock.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from gpufleet.states import SilenceState
from gpufleet.v1 import node_pb2 as pb
from node_daemon.alerts.alertmanager import alert_labels, rfc3339
from node_daemon.alerts.am_silences import AmSilence
from node_daemon.alerts.model import AlertRecord
from node_daemon.alerts.silence_book import SilenceBook
from node_daemon.alerts.silences import (
    AlertSilence,
    Silence,
    alert_silence_to_alertmanager,
    to_alertmanager,
)
from node_daemon.journal.event_journal import EventJournal

# (until ms, by, reason, silence id): an alert's silenced_* fields and silence_id.
SilencedAs = tuple[int | None, str, str, str]
NOT_SILENCED: SilencedAs = (None, "", "", "")


@dataclass(frozen=True)
class SilenceChange:
    """An alert whose silence changed: its new copy, and the event that says so."""

    alert: AlertRecord
    kind: pb.EventKind.ValueType
    summary: str


class Silencing:
    def __init__(self, journal: EventJournal, alerts: Iterable[AlertRecord]) -> None:
        self.book = SilenceBook(journal)
        self._own = _own_silences(alerts)
        self.node_labels: dict[str, str] = {}

    def silenced_as(self, alert: AlertRecord, now_ms: int) -> SilencedAs:
        """What keeps `alert` quiet now, if anything."""
        own = self._own.get(alert.key)
        if own is not None and own.until_unix_ms <= now_ms:
            own = None
        silence = self.book.covering(alert_labels(alert, self.node_labels), now_ms)
        if silence is not None and (own is None or silence.ends_unix_ms >= own.until_unix_ms):
            return (silence.ends_unix_ms, silence.created_by, silence.comment, silence.id)
        if own is not None:
            return (own.until_unix_ms, own.by, own.reason, "")
        return NOT_SILENCED

    def set_own(self, key: str, own: AlertSilence | None) -> AlertSilence | None:
        """Set (or lift, None) an alert's own silence; the one it had, to undo with."""
        before = self._own.pop(key, None)
        if own is not None:
            self._own[key] = own
        return before

    def changes(self, alerts: Iterable[AlertRecord], now_ms: int) -> list[SilenceChange]:
        """Alerts whose silence changed, as new copies; nothing is applied here, so that a
        person's change refused by the journal leaves the alerts as they were."""
        for key in [k for k, own in self._own.items() if own.until_unix_ms <= now_ms]:
            del self._own[key]
        found = []
        for alert in alerts:
            wanted = self.silenced_as(alert, now_ms)
            if wanted == silenced_fields(alert):
                continue
            updated = replace(alert, updated_unix_ms=now_ms)
            set_silenced(updated, wanted)
            if wanted[0] is None:
                found.append(SilenceChange(updated, pb.EVENT_KIND_ALERT_UNSILENCED,
                                           self._why_unsilenced(alert, now_ms)))  # fmt: skip
            else:
                found.append(SilenceChange(updated, pb.EVENT_KIND_ALERT_SILENCED,
                                           describe_silenced(wanted)))  # fmt: skip
        return found

    def _why_unsilenced(self, alert: AlertRecord, now_ms: int) -> str:
        silence = self.book.get(alert.silence_id) if alert.silence_id else None
        if silence is None:
            return "silence expired"
        if silence.expired_by:
            return f"silence {silence.id} ended by {silence.expired_by}"
        if silence.state(now_ms) is SilenceState.EXPIRED:
            return f"silence {silence.id} ended"
        return f"silence {silence.id} no longer matches"

    def ended(self, now_ms: int) -> list[Silence]:
        """Silences that reached their end time since the last call (to be announced)."""
        due = self.book.due(now_ms)
        for silence in due:
            self.book.announced(silence.id)
        return due

    def am_view(self, alerts: Iterable[AlertRecord], now_ms: int) -> list[AmSilence]:
        """What Alertmanager should hold: pending and active matcher silences, and the own
        silences of `alerts` (the firing ones) by each alert's exact label set."""
        mirrored = [to_alertmanager(s, self.node_labels) for s in self.book.live(now_ms)]
        for alert in alerts:
            own = self._own.get(alert.key)
            if own is not None and own.until_unix_ms > now_ms:
                mirrored.append(alert_silence_to_alertmanager(
                    alert.id, alert_labels(alert, self.node_labels), own.since_unix_ms,
                    own.until_unix_ms, own.by, own.reason,
                ))  # fmt: skip
        return mirrored


def _own_silences(alerts: Iterable[AlertRecord]) -> dict[str, AlertSilence]:
    """Per-alert silences by alert key, as the journal's alerts show them after a restart.

    An alert that a matcher silence showed as silenced when the daemon stopped shows
    only that one: its own silence beneath, if it had one, is not kept.
    """
    own = {}
    for alert in alerts:
        if alert.silenced_until_unix_ms is not None and not alert.silence_id:
            own[alert.key] = AlertSilence(
                alert.silenced_until_unix_ms, alert.silenced_by, alert.silence_reason,
                alert.updated_unix_ms,
            )  # fmt: skip
    return own


def silenced_fields(alert: AlertRecord) -> SilencedAs:
    return (alert.silenced_until_unix_ms, alert.silenced_by, alert.silence_reason,
            alert.silence_id)  # fmt: skip


def set_silenced(alert: AlertRecord, silenced: SilencedAs) -> None:
    alert.silenced_until_unix_ms, alert.silenced_by, alert.silence_reason, alert.silence_id = (
        silenced
    )


def describe_silenced(silenced: SilencedAs) -> str:
    until, by, reason, silence_id = silenced
    what = f"silence {silence_id}" if silence_id else "its own silence"
    return f"silenced until {rfc3339(until or 0)} by {what} of {by}: {reason}"
