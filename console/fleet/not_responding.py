"""NotRespondingAlarm: the console's own critical alert for a node that has gone quiet.

The daemon cannot raise this one (it is the one not answering), so the console
does, from the DataWatchdog's verdicts: rule `node_not_responding`, severity
critical, on the node (no GPU). It travels as any alert does, as events into
the AlertBook, so the table, the tiles and the notifier treat it alike.

It is the console's alone: its id starts with LOCAL_ID_PREFIX, its events have
negative sequence numbers (a daemon's journal counts up from 1, so they never
collide nor move a node's resume point), a node's alert listing does not
replace it, and acknowledging or silencing it is done here, never sent to the
node. Each outage gets a new id, so each is announced once.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable
from dataclasses import replace

from console.fleet.alert_rows import AlertRow
from console.fleet.alerts import EventRow
from console.fleet.staleness import Quiet
from console.fleet.updates import LinkState
from gpufleet.v1.alert_severity import Severity

RULE = "node_not_responding"
LOCAL_ID_PREFIX = "console-stale"
CONSOLE_ACTOR = "console"
DETAIL_CHARS = 80  # of the link's error, in the summary


def is_local(alert: AlertRow) -> bool:
    """Whether the console raised the alert itself (and so handles it itself)."""
    return alert.id.startswith(LOCAL_ID_PREFIX)


class NotRespondingAlarm:
    """One firing alert per quiet node at most; events for each raise, clear, ack, silence."""

    def __init__(self, wall_clock: Callable[[], float] = time.time) -> None:
        self._wall_clock = wall_clock
        self._firing: dict[str, AlertRow] = {}  # target -> its alert while not responding
        self._silent_at_raise: dict[str, float] = {}  # target -> seconds quiet when raised
        self._outages = itertools.count(1)
        self._seqs = itertools.count(-1, -1)

    def firing(self, target: str) -> AlertRow | None:
        return self._firing.get(target)

    def update(self, quiet: dict[str, Quiet], name_of: Callable[[str], str]) -> list[EventRow]:
        """Raise for nodes newly not responding, clear for those whose data flows again."""
        events = [
            self._raise(q, name_of(target))
            for target, q in quiet.items()
            if q.not_responding and target not in self._firing
        ]
        back = [t for t in self._firing if t not in quiet or not quiet[t].not_responding]
        events += [self._clear(target, name_of(target)) for target in back]
        return events

    def refresh(self, quiet: dict[str, Quiet]) -> list[AlertRow]:
        """Firing alerts whose value (seconds without data) has grown by a whole second."""
        fresh = []
        for target, alert in self._firing.items():
            q = quiet.get(target)
            if q is not None and alert.value is not None and int(q.silent_s) > alert.value:
                now = float(int(q.silent_s))
                fresh.append(replace(alert, value=now, peak_value=now))
        self._firing.update((a.target, a) for a in fresh)
        return fresh

    def forget(self, targets: Iterable[str]) -> None:
        for target in targets:
            self._firing.pop(target, None)
            self._silent_at_raise.pop(target, None)

    def acknowledge(self, alert: AlertRow, actor: str) -> EventRow | None:
        """Acknowledge in this console only; None if the alert is not one of ours firing."""
        current = self._current(alert)
        if current is None or current.acknowledged:
            return None
        now_ms = self._now_ms()
        acked = replace(
            current, acknowledged_by=actor, acknowledged_unix_ms=now_ms, updated_unix_ms=now_ms
        )
        return self._event(acked, "alert_acknowledged", f"acknowledged by {actor}", actor)

    def silence(self, alert: AlertRow, duration_s: int, actor: str, reason: str) -> EventRow | None:
        """Silence (0 s: lift the silence) in this console only; None if not ours firing."""
        current = self._current(alert)
        if current is None:
            return None
        now_ms = self._now_ms()
        until = now_ms + duration_s * 1000 if duration_s else None
        quiet = replace(current, silenced_until_unix_ms=until, silenced_by=actor,
                        silence_reason=reason, updated_unix_ms=now_ms)  # fmt: skip
        what = f"silenced for {duration_s // 60} min: {reason}" if until else "silence lifted"
        return self._event(quiet, "alert_silenced", what, actor)

    # -- raising and clearing ----------------------------------------------------

    def _raise(self, quiet: Quiet, name: str) -> EventRow:
        now_ms = self._now_ms()
        summary = f"{name} not responding: {_why(quiet)}"
        self._silent_at_raise[quiet.target] = quiet.silent_s
        alert = AlertRow(
            target=quiet.target, id=f"{LOCAL_ID_PREFIX}-{next(self._outages)}", key=RULE,
            rule=RULE, severity=Severity.CRITICAL, firing=True, gpu_index=None, gpu_uuid="",
            pid=None, value=float(int(quiet.silent_s)), unit="s", summary=summary,
            started_unix_ms=now_ms, updated_unix_ms=now_ms, cleared_unix_ms=None,
            occurrences=1, acknowledged_by="", acknowledged_unix_ms=None,
            silenced_until_unix_ms=None, silenced_by="", silence_reason="",
            peak_value=float(int(quiet.silent_s)),
        )  # fmt: skip
        return self._event(alert, "alert_raised", summary)

    def _clear(self, target: str, name: str) -> EventRow:
        alert = self._firing[target]
        now_ms = self._now_ms()
        quiet_s = (now_ms - alert.started_unix_ms) / 1000 + self._silent_at_raise.pop(target, 0.0)
        cleared = replace(alert, firing=False, cleared_unix_ms=now_ms, updated_unix_ms=now_ms,
                          value=round(quiet_s, 1), peak_value=round(quiet_s, 1))  # fmt: skip
        return self._event(cleared, "alert_cleared", f"{name} responding again after "
                           f"{quiet_s:.0f} s without data")  # fmt: skip

    def _event(self, alert: AlertRow, kind: str, summary: str, actor: str = "") -> EventRow:
        if alert.firing:
            self._firing[alert.target] = alert
        else:
            self._firing.pop(alert.target, None)
        return EventRow(
            target=alert.target, seq=next(self._seqs), time_unix_ms=alert.updated_unix_ms,
            kind=kind, gpu_index=None, summary=summary, actor=actor or CONSOLE_ACTOR,
            alert=alert, replayed=False,
        )  # fmt: skip

    def _current(self, alert: AlertRow) -> AlertRow | None:
        current = self._firing.get(alert.target)
        return current if current is not None and current.id == alert.id else None

    def _now_ms(self) -> int:
        return int(self._wall_clock() * 1000)


def _why(quiet: Quiet) -> str:
    """ "no data for 4 s (last batch 15:02:11); link reconnecting (UNAVAILABLE: ...)"."""
    last = time.strftime("%H:%M:%S", time.localtime(quiet.last_batch_unix_s))
    link = f"link {quiet.link.value}"
    if quiet.link_detail:  # gRPC's first clause says it; the rest is addresses and codes
        link += f" ({quiet.link_detail.split(';')[0][:DETAIL_CHARS]})"
    if quiet.stale:
        data = f"no data for {quiet.silent_s:.0f} s (last batch {last})"
        return data if quiet.link is LinkState.CONNECTED else f"{data}; {link}"
    return f"{link} for {quiet.link_down_s or 0:.0f} s; last batch {last}"
