"""Push the node's alerts to Alertmanager (API v2), the way Prometheus does, and more.

The alert engine calls `AlertmanagerPusher.publish` with every alert whose state
changed; the pusher's thread 'gpufleet-alertmanager' does all network work, so
the engine never waits on a slow Alertmanager. Settings (URLs, labels, resend,
TLS, credentials) come from [alertmanager] (node_daemon.alerts.am_settings); the
HTTP is node_daemon.alerts.am_client's.

What goes over the wire:

- A firing alert is POSTed to `{url}/api/v2/alerts` at once, then re-sent every
  resend interval while it fires, each time with `endsAt` = now + 4 x resend, so
  a dead daemon's warnings resolve by themselves a few resends later, as
  Prometheus' do. Every alert is annotated `last_confirmed`: when the daemon last
  sent it.
- A firing CRITICAL alert is sent with `endsAt` = now + `critical_hold_s` (a day
  by default) instead: a critical must not look "resolved" merely because its
  node died. It stays firing until the daemon says it cleared (after a restart
  the engine reloads its firing alerts and clears those whose condition is gone);
  a stale one is told by its `last_confirmed`, and by GpufleetWatchdog being gone.
- A cleared alert is sent once more with `endsAt` = the time it cleared
  (Alertmanager then notifies "resolved"), and forgotten once delivered; a URL
  that fails keeps it for 4 resends (a critical's: for the whole hold).
- At its first contact with each Alertmanager after the start, the pusher
  resolves the alerts an earlier run of this node pushed that no longer fire
  (cleared while the daemon was down, or whose resolution was lost): found by
  the node's labels and the `last_confirmed` annotation only gpufleet sets.
- GpufleetWatchdog (`severity="none"`), with the node's labels, fires while the
  daemon lives: a dead-man's switch for a heartbeat receiver. It is the pusher's
  own, not an alert of the engine (not journaled, not in consoles); it rides in
  every POST, ends 4 resends after the last, and is resolved on a clean stop.
- Labels identify an alert in Alertmanager, so they hold only what is stable for
  the alert's life: `alertname` (the rule), `severity`, the node's labels, and
  `gpu` / `UUID` (the names dcgm-exporter uses, so routes and inhibitions can
  match Prometheus' GPU alerts) and `pid` where the alert has them. When the
  engine changes an alert's severity, the old label set is resolved and the new
  one fires. Value, peak, unit and occurrences go into the annotations.

Silences: the daemon's silences (from `set_silence_source`) are mirrored into
each Alertmanager's own (API v2), at start, on `silences_changed` and every
resend, so the pager stops when the console says silenced. Only silences this
node made are touched, known by a tag at the end of their comment
(node_daemon.alerts.am_silences); reconciling by tag survives restarts without
duplicates. A silenced alert is still pushed: Alertmanager shows it suppressed.

Network failures are normal: a URL that fails is logged once per outage (and
once more when it is back), keeps every alert, and is retried at the next
resend. URLs are tried one after another with a short per-URL timeout; URLs that
work go first, and a failing one is only retried at resend time, so it delays
the others by at most one timeout per resend.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from gpufleet.v1.alert_severity import Severity
from node_daemon.alerts.am_client import AmClient, AmError, AmTransport
from node_daemon.alerts.am_payloads import (
    WATCHDOG_ALERTNAME,
    alert_labels,
    alert_payload,
    rfc3339,
    stale_payloads,
    watchdog_labels,
    watchdog_payload,
)
from node_daemon.alerts.am_settings import (
    ALERT_LABELS,
    ENDS_AFTER_RESENDS,
    AlertmanagerSettings,
    validate_node_labels,
)
from node_daemon.alerts.am_silences import AmSilence, plan_silences
from node_daemon.alerts.model import AlertRecord

__all__ = [
    "ALERT_LABELS", "ENDS_AFTER_RESENDS", "THREAD_NAME", "WATCHDOG_ALERTNAME",
    "AlertmanagerPusher", "UrlStats", "alert_labels", "rfc3339", "validate_node_labels",
]  # fmt: skip

log = logging.getLogger(__name__)

THREAD_NAME = "gpufleet-alertmanager"
Payload = dict[str, object]
LabelKey = frozenset[tuple[str, str]]
SilenceSource = Callable[[], Sequence[AmSilence]]


@dataclass(frozen=True)
class UrlStats:
    """Counters of one Alertmanager URL."""

    sent_batches: int
    failed_batches: int
    down: bool
    silence_syncs: int = 0
    silence_failures: int = 0
    silences_down: bool = False


@dataclass(frozen=True)
class _Retarget:
    """New settings for the pusher's thread to take over (`reconfigure`)."""

    settings: AlertmanagerSettings
    node_labels: dict[str, str]
    transport: AmTransport


@dataclass
class _Firing:
    record: AlertRecord
    labels: dict[str, str]

    @property
    def held(self) -> bool:
        return self.record.severity is Severity.CRITICAL


@dataclass
class _Resolved:
    payload: Payload
    # After this (monotonic) time, Alertmanager has resolved the alert by its last endsAt.
    drop_at: float


@dataclass
class _Target:
    client: AmClient
    resolved: dict[LabelKey, _Resolved] = field(default_factory=dict)
    down: bool = False
    sent_batches: int = 0
    failed_batches: int = 0
    swept: bool = False  # an earlier run's leftovers resolved
    sweep_failures: int = 0
    silences_down: bool = False
    silence_syncs: int = 0
    silence_failures: int = 0

    @property
    def url(self) -> str:
        return self.client.url

    def pending_resolved(self, now_monotonic: float) -> list[Payload]:
        expired = [key for key, r in self.resolved.items() if r.drop_at <= now_monotonic]
        for key in expired:
            del self.resolved[key]
        return [r.payload for r in self.resolved.values()]


class AlertmanagerPusher:
    """Sends the node's alerts to every Alertmanager of `settings` from 'gpufleet-alertmanager'.

    Args:
        settings: URLs, resend interval, timeout, TLS and credentials, watchdog, hold.
        node_labels: labels added to every alert; must hold `node`, e.g.
            `settings.node_labels("gpu-node-01")`.
        clock: wall clock in Unix seconds, for `endsAt`; tests pass a fixed one.
    """

    def __init__(
        self,
        settings: AlertmanagerSettings,
        node_labels: Mapping[str, str],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._node_labels = self._checked_labels(node_labels)
        self._settings, self._clock = settings, clock
        self._resend_s = settings.resend_interval_s
        transport = AmTransport(settings)
        self._targets = [_Target(AmClient(url, transport)) for url in settings.urls]
        self._started_ms = clock() * 1000
        self._firing: dict[str, _Firing] = {}  # by AlertRecord.key; the thread's alone
        self._inbox: dict[str, AlertRecord] = {}  # by key: only the latest state matters
        self._silence_source: SilenceSource | None = None
        self._silences_dirty = False
        self._retarget: _Retarget | None = None
        self._stopping = False
        self._wakeup = threading.Condition()
        self._thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)

    @staticmethod
    def _checked_labels(node_labels: Mapping[str, str]) -> dict[str, str]:
        labels = validate_node_labels(node_labels)
        if "node" not in labels:
            raise ValueError("the node's labels must include 'node' (its name)")
        return labels

    @property
    def sent_batches(self) -> int:
        """POSTs of alerts that Alertmanager accepted, all URLs together."""
        return sum(t.sent_batches for t in self._targets)

    @property
    def failed_batches(self) -> int:
        """POSTs that failed (network error, timeout, HTTP error), all URLs together."""
        return sum(t.failed_batches for t in self._targets)

    def url_stats(self) -> dict[str, UrlStats]:
        return {t.url: self._stats(t) for t in self._targets}

    @staticmethod
    def _stats(t: _Target) -> UrlStats:
        return UrlStats(t.sent_batches, t.failed_batches, t.down, t.silence_syncs,
                        t.silence_failures, t.silences_down)  # fmt: skip

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread (after the request in flight, and the watchdog's farewell)."""
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

    def set_silence_source(self, source: SilenceSource) -> None:
        """Where the silences to mirror come from. `source` is called on the pusher's thread at
        each reconcile, so it must be thread-safe and quick (no network)."""
        with self._wakeup:
            self._silence_source = source
            self._silences_dirty = True
            self._wakeup.notify()

    def reconfigure(self, settings: AlertmanagerSettings, node_labels: Mapping[str, str]) -> None:
        """Push by `settings` from now on (a reload); never blocks on the network.

        The pusher's thread takes them over between rounds, keeping what it knows: the
        firing alerts go on firing (to new URLs at once), resolutions not yet delivered
        stay queued for the URLs that stay, and the silences are mirrored again (by tag,
        so without duplicates). A URL no longer configured is left as a clean stop leaves
        it: the watchdog ended there, the rest left to lapse by its endsAt. New node
        labels are new alerts to Alertmanager: the old label sets are resolved.
        ConfigError (here, not on the thread) if the TLS files cannot be loaded.
        """
        labels = self._checked_labels(node_labels)
        retarget = _Retarget(settings, labels, AmTransport(settings))
        with self._wakeup:
            self._retarget = retarget
            self._silences_dirty = True
            self._wakeup.notify()

    def silences_changed(self) -> None:
        """The source's silences changed: bring every Alertmanager in step soon; never blocks."""
        with self._wakeup:
            self._silences_dirty = True
            self._wakeup.notify()

    # -- the thread -------------------------------------------------------------------------

    def _run(self) -> None:
        next_resend = time.monotonic()  # the first round at once: watchdog, sweep, silences
        while (wake := self._next_wake(next_resend)) is not None:
            records, silences_dirty, retarget = wake
            if retarget is not None:
                try:
                    self._take_over(retarget)
                except Exception:  # as in _handle_safely: the push must go on
                    log.exception("taking over the reloaded Alertmanager settings failed")
                next_resend = time.monotonic()  # a full round at once, to the new URLs too
            due = time.monotonic() >= next_resend
            if due:
                next_resend = time.monotonic() + self._resend_s
            if records or due or silences_dirty:
                self._handle_safely(records, due, silences_dirty)
        self._farewell(self._targets, self._node_labels, self._settings.watchdog)

    def _next_wake(
        self, deadline: float
    ) -> tuple[list[AlertRecord], bool, _Retarget | None] | None:
        """Alerts published since the last call, whether silences changed and new settings;
        None when stopping."""
        with self._wakeup:
            self._wakeup.wait_for(
                lambda: self._stopping or self._inbox or self._silences_dirty,
                max(0.0, deadline - time.monotonic()),
            )
            if self._stopping:
                return None
            records, self._inbox = list(self._inbox.values()), {}
            dirty, self._silences_dirty = self._silences_dirty, False
            retarget, self._retarget = self._retarget, None
            return records, dirty, retarget

    def _take_over(self, new: _Retarget) -> None:
        """Switch to `new` settings, keeping the firing alerts and each staying URL's state."""
        old_labels, old_watchdog = self._node_labels, self._settings.watchdog
        staying = {t.url: t for t in self._targets}
        kept = [staying[url] for url in new.settings.urls if url in staying]
        targets = []
        for url in new.settings.urls:
            target = staying.pop(url, None) or _Target(AmClient(url, new.transport))
            target.client = AmClient(url, new.transport)
            targets.append(target)
        self._farewell(list(staying.values()), old_labels, old_watchdog)  # URLs gone
        if new.node_labels != old_labels or not new.settings.watchdog:
            self._farewell(kept, old_labels, old_watchdog)  # the old watchdog's label set
        self._targets, self._settings = targets, new.settings
        self._resend_s, self._node_labels = new.settings.resend_interval_s, new.node_labels
        for firing in list(self._firing.values()):
            self._apply(firing.record)  # a new label set resolves the old one

    def _handle_safely(self, records: list[AlertRecord], due: bool, silences: bool) -> None:
        try:
            for record in records:
                self._apply(record)
            if records or due:
                self._send_round(due)
            if silences or due:
                self._sync_silences(due)
        except Exception:
            # A bug in one round must not stop the push for good.
            log.exception("pushing alerts to Alertmanager failed")

    # -- alerts ---------------------------------------------------------------------------

    def _apply(self, record: AlertRecord) -> None:
        labels = alert_labels(record, self._node_labels)
        old = self._firing.pop(record.key, None)
        now_ms = self._clock() * 1000
        if old is not None and old.labels != labels:
            # A new label set is a new alert to Alertmanager: end the old one now.
            payload = alert_payload(old.record, old.labels, record.updated_unix_ms, now_ms)
            self._queue_resolved(old.labels, payload, old.held)
        firing = _Firing(record, labels)
        if record.firing:
            self._firing[record.key] = firing
            for target in self._targets:
                target.resolved.pop(frozenset(labels.items()), None)
        else:
            ended_ms = record.cleared_unix_ms or now_ms
            self._queue_resolved(
                labels, alert_payload(record, labels, ended_ms, now_ms), firing.held
            )

    def _queue_resolved(self, labels: dict[str, str], payload: Payload, held: bool) -> None:
        key: LabelKey = frozenset(labels.items())
        # A held critical's resolution is retried for as long as Alertmanager would hold it.
        keep_s = self._settings.critical_hold_s if held else ENDS_AFTER_RESENDS * self._resend_s
        drop_at = time.monotonic() + keep_s
        for target in self._targets:
            target.resolved[key] = _Resolved(payload, drop_at)

    def _firing_payloads(self) -> list[Payload]:
        now_ms = self._clock() * 1000
        ends_ms = now_ms + ENDS_AFTER_RESENDS * self._resend_s * 1000
        held_ms = now_ms + self._settings.critical_hold_s * 1000
        payloads = [
            alert_payload(f.record, f.labels, held_ms if f.held else ends_ms, now_ms)
            for f in self._firing.values()
        ]
        if self._settings.watchdog:
            payloads.append(watchdog_payload(self._node_labels, self._started_ms, ends_ms, now_ms))
        return payloads

    def _send_round(self, due: bool) -> None:
        """Send every firing alert and the pending resolved ones; failing URLs only when due."""
        firing = self._firing_payloads()
        for target in sorted(self._targets, key=lambda t: t.down):  # working URLs first
            if due or not target.down:
                self._send_to(target, firing, due)

    def _send_to(self, target: _Target, firing: list[Payload], due: bool) -> None:
        body = firing + target.pending_resolved(time.monotonic())
        if body and self._post(target, body):
            target.resolved.clear()
            if due and not target.swept:
                self._sweep(target)

    def _post(self, target: _Target, body: list[Payload]) -> bool:
        try:
            target.client.post_alerts(body)
        except AmError as exc:
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
                target.url, exc, count, self._resend_s,
            )  # fmt: skip

    def _record_success(self, target: _Target) -> None:
        target.sent_batches += 1
        if target.down:
            target.down = False
            log.warning("Alertmanager %s is back; alerts delivered", target.url)

    def _sweep(self, target: _Target) -> None:
        """Resolve what an earlier run of this node left firing there and no longer fires."""
        try:
            # By node alone: alerts of an earlier run with other [alertmanager] labels too.
            held = target.client.alerts({"node": self._node_labels["node"]})
            stale = self._stale(held)
            if stale:
                target.client.post_alerts(stale)
                log.info("Alertmanager %s: resolved %d alerts of an earlier run that no longer "
                         "fire", target.url, len(stale))  # fmt: skip
        except AmError as exc:
            target.sweep_failures += 1
            if target.sweep_failures == 1:
                log.warning("Alertmanager %s: cannot look for alerts of an earlier run (%s); "
                            "retrying every %g s", target.url, exc, self._resend_s)  # fmt: skip
            return
        target.swept = True

    def _stale(self, held: list[object]) -> list[Payload]:
        live = {frozenset(f.labels.items()) for f in self._firing.values()}
        if self._settings.watchdog:
            live.add(frozenset(watchdog_labels(self._node_labels).items()))
        return stale_payloads(held, self._node_labels["node"], live, self._clock() * 1000)

    def _farewell(
        self, targets: list[_Target], node_labels: dict[str, str], watchdog: bool
    ) -> None:
        """On a clean stop (and for URLs a reload removes), end the watchdog at once where
        Alertmanager answers."""
        if not watchdog:
            return
        now_ms = self._clock() * 1000
        farewell = [watchdog_payload(node_labels, self._started_ms, now_ms, now_ms)]
        for target in targets:
            if not target.down:
                try:
                    target.client.post_alerts(farewell)
                except AmError as exc:
                    log.info("Alertmanager %s: watchdog not ended (%s)", target.url, exc)

    # -- silences -------------------------------------------------------------------------

    def _sync_silences(self, due: bool) -> None:
        with self._wakeup:
            source = self._silence_source
        if source is None:
            return
        try:
            desired = list(source())
        except Exception:
            log.exception("the daemon's silences could not be read for Alertmanager")
            return
        for target in self._targets:
            if due or not (target.down or target.silences_down):
                self._sync_target(target, desired)

    def _sync_target(self, target: _Target, desired: list[AmSilence]) -> None:
        now_ms = int(self._clock() * 1000)
        problem: AmError | None = None
        try:
            plan = plan_silences(
                desired, target.client.silences(), self._node_labels["node"], now_ms
            )
        except AmError as exc:
            self._silences_failed(target, exc)
            return
        for body in plan.create:
            try:
                target.client.create_silence(body)
            except AmError as exc:
                problem = problem or exc
        for silence_id in plan.expire:
            try:
                target.client.expire_silence(silence_id)
            except AmError as exc:
                problem = problem or exc
        if problem is not None:
            self._silences_failed(target, problem)
            return
        target.silence_syncs += 1
        if target.silences_down:
            target.silences_down = False
            log.warning("Alertmanager %s: silences in step again", target.url)

    def _silences_failed(self, target: _Target, exc: AmError) -> None:
        target.silence_failures += 1
        if not target.silences_down:
            target.silences_down = True
            log.warning("Alertmanager %s: silences not in step (%s); retrying every %g s",
                        target.url, exc, self._resend_s)  # fmt: skip
