"""Push the node's alerts to Alertmanager (API v2), the way Prometheus does.

The alert engine calls `AlertmanagerPusher.publish` with every alert whose state
changed; the pusher's thread 'gpufleet-alertmanager' does all network work, so
the engine never waits on a slow Alertmanager.

What goes over the wire, following Prometheus' own practice:

- A firing alert is POSTed to `{url}/api/v2/alerts` at once, then re-sent every
  `resend_s` while it fires, each time with `endsAt` = now + 4 x `resend_s`.
  Alertmanager forgets an alert that stops being re-sent, so a dead daemon's
  alerts resolve by themselves a few resends later.
- A cleared alert is sent once more with `endsAt` = the time it cleared
  (Alertmanager then notifies "resolved"), and forgotten.
- Labels identify an alert in Alertmanager, so they hold only what is stable for
  the alert's life: `alertname` (the rule), `severity`, the node's labels, and
  `gpu` / `UUID` (the names dcgm-exporter uses, so routes and inhibitions can
  match Prometheus' GPU alerts) and `pid` where the alert has them. When the
  engine changes an alert's severity, the old label set is resolved and the new
  one fires. Value, unit and occurrences go into the annotations.

The console's acknowledge and silence are the operators' own view of the node
and do NOT stop the push: the pager and chat are muted with Alertmanager's own
silences (and inhibit rules), which is where on-call expects to find them.

Network failures are normal: a URL that fails is logged once per outage (and
once more when it is back), keeps every alert, and is retried at the next
resend. URLs are tried one after another with a short per-URL timeout; URLs that
work go first, and a failing one is only retried at resend time, so it delays
the others by at most one timeout per resend.
"""

from __future__ import annotations

import http.client
import json
import logging
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from node_daemon.alerts.model import AlertRecord

log = logging.getLogger(__name__)

THREAD_NAME = "gpufleet-alertmanager"
# endsAt = now + this many resend intervals, as Prometheus does (its default is 4).
ENDS_AFTER_RESENDS = 4
ALERT_LABELS = ("alertname", "severity", "gpu", "UUID", "pid")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")

Payload = dict[str, object]
LabelKey = frozenset[tuple[str, str]]


def rfc3339(unix_ms: float) -> str:
    """`unix_ms` as RFC 3339 in UTC with milliseconds, e.g. 2024-05-01T12:00:00.000Z."""
    moment = datetime.fromtimestamp(unix_ms / 1000, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def alert_labels(alert: AlertRecord, node_labels: Mapping[str, str]) -> dict[str, str]:
    """The label set that identifies `alert` in Alertmanager."""
    labels = dict(node_labels)
    labels["alertname"] = alert.rule
    labels["severity"] = alert.severity.label
    if alert.gpu_index is not None:
        labels["gpu"] = str(alert.gpu_index)
    if alert.gpu_uuid:
        labels["UUID"] = alert.gpu_uuid
    if alert.pid is not None:
        labels["pid"] = str(alert.pid)
    return labels


def alert_annotations(alert: AlertRecord) -> dict[str, str]:
    """Summary and a one-line description (rule, value with unit, occurrences)."""
    value = "" if alert.value is None else f", value {alert.value:g}{alert.unit}"
    description = f"{alert.rule}{value}, occurrences {alert.occurrences}"
    return {"summary": alert.summary, "description": description}


def alert_payload(alert: AlertRecord, labels: Mapping[str, str], ends_unix_ms: float) -> Payload:
    """One element of the JSON list POSTed to /api/v2/alerts."""
    # Alertmanager rejects an alert that ends before it starts.
    ends_unix_ms = max(ends_unix_ms, alert.started_unix_ms)
    return {
        "labels": dict(labels),
        "annotations": alert_annotations(alert),
        "startsAt": rfc3339(alert.started_unix_ms),
        "endsAt": rfc3339(ends_unix_ms),
    }


def validate_node_labels(node_labels: Mapping[str, str]) -> dict[str, str]:
    """The node's labels, or ValueError naming what Alertmanager would reject or we overwrite."""
    for name, value in node_labels.items():
        if not _LABEL_NAME.fullmatch(name) or name.startswith("__"):
            raise ValueError(f"invalid Alertmanager label name {name!r}")
        if name in ALERT_LABELS:
            raise ValueError(f"node label {name!r} clashes with an alert label {ALERT_LABELS}")
        if not value:
            raise ValueError(f"node label {name!r} has an empty value")
    return dict(node_labels)


@dataclass(frozen=True)
class UrlStats:
    """Counters of one Alertmanager URL."""

    sent_batches: int
    failed_batches: int
    down: bool


@dataclass
class _Firing:
    record: AlertRecord
    labels: dict[str, str]


@dataclass
class _Resolved:
    payload: Payload
    # After this (monotonic) time, Alertmanager has resolved the alert by its last endsAt.
    drop_at: float


@dataclass
class _Target:
    url: str
    endpoint: str
    resolved: dict[LabelKey, _Resolved] = field(default_factory=dict)
    down: bool = False
    sent_batches: int = 0
    failed_batches: int = 0

    def pending_resolved(self, now_monotonic: float) -> list[Payload]:
        expired = [key for key, r in self.resolved.items() if r.drop_at <= now_monotonic]
        for key in expired:
            del self.resolved[key]
        return [r.payload for r in self.resolved.values()]


def _target(url: str) -> _Target:
    base = url.rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise ValueError(f"Alertmanager URL must start with http:// or https://: {url!r}")
    return _Target(url=base, endpoint=f"{base}/api/v2/alerts")


def _describe(exc: Exception) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        body = exc.read().decode(errors="replace").strip()
        return f"HTTP {exc.code}: {body[:300]}"
    if isinstance(exc, urllib.error.URLError):
        return str(exc.reason)
    return str(exc) or type(exc).__name__


class AlertmanagerPusher:
    """Sends the node's alerts to every Alertmanager in `urls` from thread 'gpufleet-alertmanager'.

    Args:
        urls: base URLs, e.g. `http://127.0.0.1:9093` (the pusher adds `/api/v2/alerts`).
        node_labels: labels added to every alert, e.g. `{"node": "gpu-node-01"}`.
        resend_s: how often firing alerts are re-sent.
        timeout_s: per-request timeout for each URL.
        clock: wall clock in Unix seconds, for `endsAt`; tests pass a fixed one.
    """

    def __init__(
        self,
        urls: Sequence[str],
        node_labels: Mapping[str, str],
        resend_s: float = 30.0,
        timeout_s: float = 5.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if resend_s <= 0 or timeout_s <= 0:
            raise ValueError("resend_s and timeout_s must be positive")
        self._targets = [_target(url) for url in urls]
        self._node_labels = validate_node_labels(node_labels)
        self._resend_s, self._timeout_s, self._clock = resend_s, timeout_s, clock
        self._firing: dict[str, _Firing] = {}  # by AlertRecord.key; the thread's alone
        self._inbox: dict[str, AlertRecord] = {}  # by key: only the latest state matters
        self._stopping = False
        self._wakeup = threading.Condition()
        self._thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)

    @property
    def sent_batches(self) -> int:
        """POSTs that Alertmanager accepted, all URLs together."""
        return sum(t.sent_batches for t in self._targets)

    @property
    def failed_batches(self) -> int:
        """POSTs that failed (network error, timeout, HTTP error), all URLs together."""
        return sum(t.failed_batches for t in self._targets)

    def url_stats(self) -> dict[str, UrlStats]:
        return {t.url: UrlStats(t.sent_batches, t.failed_batches, t.down) for t in self._targets}

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread (after the request in flight, if any); safe to call twice."""
        with self._wakeup:
            self._stopping = True
            self._wakeup.notify()
        if self._thread.ident is not None:
            self._thread.join()

    def publish(self, alerts: Iterable[AlertRecord]) -> None:
        """Hand alerts whose state changed to the pusher's thread; never blocks on the network."""
        copies = {alert.key: replace(alert) for alert in alerts}
        if not copies:
            return
        with self._wakeup:
            self._inbox.update(copies)
            self._wakeup.notify()

    def _run(self) -> None:
        next_resend = time.monotonic() + self._resend_s
        while (records := self._next_records(next_resend)) is not None:
            due = time.monotonic() >= next_resend
            if due:
                next_resend = time.monotonic() + self._resend_s
            if records or due:
                self._handle_safely(records, due)

    def _next_records(self, deadline: float) -> list[AlertRecord] | None:
        """Alerts published since the last call (maybe none, at `deadline`); None when stopping."""
        with self._wakeup:
            self._wakeup.wait_for(
                lambda: self._stopping or self._inbox, max(0.0, deadline - time.monotonic())
            )
            if self._stopping:
                return None
            records, self._inbox = list(self._inbox.values()), {}
            return records

    def _handle_safely(self, records: list[AlertRecord], due: bool) -> None:
        try:
            for record in records:
                self._apply(record)
            self._send_round(due)
        except Exception:
            # A bug in one round must not stop the push for good.
            log.exception("pushing alerts to Alertmanager failed")

    def _apply(self, record: AlertRecord) -> None:
        labels = alert_labels(record, self._node_labels)
        old = self._firing.pop(record.key, None)
        if old is not None and old.labels != labels:
            # A new label set is a new alert to Alertmanager: end the old one now.
            changed_ms = record.updated_unix_ms
            self._queue_resolved(old.labels, alert_payload(old.record, old.labels, changed_ms))
        if record.firing:
            self._firing[record.key] = _Firing(record, labels)
            for target in self._targets:
                target.resolved.pop(frozenset(labels.items()), None)
        else:
            ended_ms = record.cleared_unix_ms or self._clock() * 1000
            self._queue_resolved(labels, alert_payload(record, labels, ended_ms))

    def _queue_resolved(self, labels: dict[str, str], payload: Payload) -> None:
        key: LabelKey = frozenset(labels.items())
        drop_at = time.monotonic() + ENDS_AFTER_RESENDS * self._resend_s
        for target in self._targets:
            target.resolved[key] = _Resolved(payload, drop_at)

    def _send_round(self, due: bool) -> None:
        """Send every firing alert and the pending resolved ones; failing URLs only when due."""
        ends_ms = (self._clock() + ENDS_AFTER_RESENDS * self._resend_s) * 1000
        firing = [alert_payload(f.record, f.labels, ends_ms) for f in self._firing.values()]
        for target in sorted(self._targets, key=lambda t: t.down):  # working URLs first
            if due or not target.down:
                self._send_to(target, firing)

    def _send_to(self, target: _Target, firing: list[Payload]) -> None:
        body = firing + target.pending_resolved(time.monotonic())
        if body and self._post(target, body):
            target.resolved.clear()

    def _post(self, target: _Target, body: list[Payload]) -> bool:
        request = urllib.request.Request(
            target.endpoint,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=self._timeout_s) as response:
                response.read()
        except (OSError, http.client.HTTPException) as exc:  # URLError, timeouts are OSErrors
            self._record_failure(target, len(body), exc)
            return False
        self._record_success(target)
        return True

    def _record_failure(self, target: _Target, count: int, exc: Exception) -> None:
        target.failed_batches += 1
        if not target.down:
            target.down = True
            log.warning(
                "Alertmanager %s failed (%s); keeping %d alerts, retrying every %g s",
                target.url, _describe(exc), count, self._resend_s,
            )  # fmt: skip

    def _record_success(self, target: _Target) -> None:
        target.sent_batches += 1
        if target.down:
            target.down = False
            log.warning("Alertmanager %s is back; alerts delivered", target.url)
