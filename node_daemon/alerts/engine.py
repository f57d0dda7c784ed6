"""AlertEngine: turns each tick's findings into alerts, events and journal entries.

Runs on the sampler thread (after every sweep); acknowledge and silence come
from RPC threads. One lock guards the alert state. Events reach subscribers
only after the journal has them on disk.

Silences: an alert is silenced by its own silence (SilenceAlert) or by the
matcher silences (node_daemon.alerts.silences) that cover its Alertmanager
labels, whichever ends last; its silenced_* fields and silence_id say which.
That is worked out again on every tick and after every change of a silence,
so a maintenance window starts and ends on time, and an alert raised inside
one is raised silenced.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import fields, replace
from typing import Any, TypeVar, cast

from gpufleet.states import SilenceState
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1.alert_severity import Severity
from gpufleet.v1.gpu_metrics import TEMP_GPU_C, TEMP_MEM_C
from node_daemon.alerts.alertmanager import rfc3339
from node_daemon.alerts.am_silences import AmSilence
from node_daemon.alerts.detectors import (
    EccDetector,
    IdleDetector,
    LostDetector,
    PowerDetector,
    ThresholdDetector,
    ThrottleDetector,
    TrendDetector,
)
from node_daemon.alerts.findings import Finding, GpuTick
from node_daemon.alerts.health_detector import HealthDetector
from node_daemon.alerts.model import AlertRecord
from node_daemon.alerts.occurrence_detectors import LeakDetector, XidDetector
from node_daemon.alerts.rules import (
    AlertSettings,
    EccSettings,
    GpuHealthAlertSettings,
    IdleSettings,
    LeakSettings,
    PowerSettings,
    ThresholdSettings,
    ThrottleSettings,
    TrendSettings,
    XidSettings,
)
from node_daemon.alerts.silence_book import MAX_OPEN, SilenceBook
from node_daemon.alerts.silence_wire import silence_message
from node_daemon.alerts.silences import (
    AlertSilence,
    Silence,
    check_matchers,
    check_text,
    check_window,
)
from node_daemon.alerts.silencing import Silencing, describe_silenced, set_silenced
from node_daemon.alerts.wire import alert_message, alert_record
from node_daemon.backends.readings import GpuHealth, GpuReading, GpuStatic, ProcessReading
from node_daemon.errors import Invalid, NotFound, Refused
from node_daemon.health.model import GpuCondition
from node_daemon.journal.event_journal import EventJournal, StoredRecord

log = logging.getLogger(__name__)

# After a restart, alerts from the journal are kept this long while the rules
# warm up (durations, windows), so a restart does not clear and re-raise them.
RESTART_GRACE_S = 30.0
MAX_SILENCE_S = 7 * 24 * 3600
# A new peak is announced (an ALERT_CHANGED event) when it beats the last one
# announced by this much (in the alert's unit, or this fraction of it), and at
# most once per PEAK_EVENT_MIN_S: consoles show a live peak without one
# journal write per alert per tick.
PEAK_STEP, PEAK_STEP_FRACTION, PEAK_EVENT_MIN_S = 1.0, 0.02, 5.0
AlertListener = Callable[[list[AlertRecord]], None]
_S = TypeVar("_S")


class UnknownAlert(NotFound):
    pass


class AlertNotFiring(Refused):
    pass


class BadAlertRequest(Invalid):
    pass


class UnknownSilence(NotFound):
    pass


class SilenceEnded(Refused):
    pass


class TooManySilences(Refused):
    pass


class LiveRules:
    """The rule settings in force, repointed by `AlertEngine.reconfigure`.

    Each detector reads its rule through a view (`view`), not a copy: a reload changes
    the lines, durations and windows it judges by from the next tick, while its per-GPU
    state (how long a condition has held, the level reached and its hysteresis, the
    windows of ECC counts, memory and temperature) stays. So an alert whose condition
    still holds under the new rules is neither cleared nor re-raised, and a reload resets
    nothing. Repointing and judging both happen under the engine's lock.
    """

    def __init__(self, settings: AlertSettings) -> None:
        self.settings = settings
        self._views: dict[str, _RuleView] = {}

    def view(self, name: str, kind: type[_S]) -> _S:
        """The live settings of rule `name`, typed as the detectors expect them."""
        view = self._views.setdefault(name, _RuleView(getattr(self.settings, name)))
        return cast(_S, view)

    def point(self, settings: AlertSettings) -> None:
        self.settings = settings
        for name, view in self._views.items():
            view.point(getattr(settings, name))


class _RuleView:
    """One rule's settings as they are now: their fields copied in (plain attribute reads,
    as fast as the frozen settings' own), methods such as `for_model` passed through."""

    def __init__(self, settings: object) -> None:
        self.point(settings)

    def point(self, settings: object) -> None:
        values = {f.name: getattr(settings, f.name) for f in fields(settings)}  # type: ignore[arg-type]
        methods = {
            m: getattr(settings, m) for m in vars(type(settings)) if _public_method(settings, m)
        }
        self.__dict__.update(values, **methods, _settings=settings)

    def __getattr__(self, key: str) -> Any:  # only what is neither a field nor a method
        return getattr(self.__dict__["_settings"], key)


def _public_method(settings: object, name: str) -> bool:
    return not name.startswith("_") and callable(getattr(settings, name))


def build_detectors(rules: LiveRules) -> list:  # type: ignore[type-arg]
    view = rules.view
    gpu_temp = view("gpu_temp", ThresholdSettings)
    return [
        ThresholdDetector("gpu_temp", "temperature", gpu_temp, TEMP_GPU_C),
        ThresholdDetector(
            "memory_temp", "memory temperature", view("memory_temp", ThresholdSettings), TEMP_MEM_C
        ),
        PowerDetector(view("power", PowerSettings)),
        ThrottleDetector(view("throttle", ThrottleSettings)),
        EccDetector(view("ecc", EccSettings)),
        XidDetector(view("xid", XidSettings)),
        LostDetector(),
        LeakDetector(view("memory_leak", LeakSettings)),
        IdleDetector(view("idle", IdleSettings)),
        TrendDetector(view("temp_trend", TrendSettings), gpu_temp),
        HealthDetector(view("gpu_health", GpuHealthAlertSettings)),
    ]


class AlertEngine:
    def __init__(
        self,
        journal: EventJournal,
        settings: AlertSettings | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._journal, self._clock = journal, clock
        self._rules = LiveRules(settings or AlertSettings())
        self._detectors = build_detectors(self._rules)
        self._lock = threading.Lock()
        self._active: dict[str, AlertRecord] = {}
        for message in journal.alerts(firing=True):
            record = alert_record(message)
            self._active[record.key] = record
        self._carried = set(self._active)  # loaded from the journal, not yet confirmed
        self._started_s = clock()
        self._next_number = journal.highest_alert_number() + 1
        self._facts: dict[int, GpuStatic] = {}
        self._lost: set[int] = set()
        self._backend_problem: str | None = None
        self._audit_problem: Callable[[], str | None] = lambda: None
        self._unkillable: dict[str, tuple[int, int, str]] = {}  # key -> (gpu, pid, summary)
        self._reserved_for: Callable[[int], str | None] = lambda _gpu: None
        self._health_of: Callable[[int], GpuCondition | None] = lambda _gpu: None
        self._listeners: list[AlertListener] = []
        self._announced_peak: dict[str, tuple[float, float]] = {}  # key -> (peak, at s)
        self._silencing = Silencing(journal, self._active.values())
        self._silence_listeners: list[Callable[[], None]] = []
        self._mirrored: list[AmSilence] = []

    # -- wiring --------------------------------------------------------------

    def add_listener(self, listener: AlertListener) -> None:
        """Called (outside the lock) with alerts whose state changed, after the journal has them."""
        self._listeners.append(listener)

    def set_node_labels(self, labels: Mapping[str, str]) -> None:
        """The node's Alertmanager labels (node, cluster, ...): what matchers see besides the
        alert's own; the same the Alertmanager pusher sends."""
        with self._lock:
            self._silencing.node_labels = dict(labels)

    def add_silence_listener(self, listener: Callable[[], None]) -> None:
        """Called (outside the lock) when `am_silences()` may answer differently."""
        self._silence_listeners.append(listener)

    def set_gpu_facts(self, gpus: Sequence[GpuStatic]) -> None:
        with self._lock:
            self._facts = {g.index: g for g in gpus}

    def set_backend_problem(self, detail: str | None) -> None:
        """Degraded backend (a node-level critical alert), or None when it works again."""
        with self._lock:
            self._backend_problem = detail

    def set_audit_problem(self, problem: Callable[[], str | None]) -> None:
        """Why the audit log cannot be written now (None when it can).

        Every change is audited before it is made, so on a full disk the audit
        log's write fails first and the journal is never written at all: the
        state_disk alert must follow either.
        """
        self._audit_problem = problem

    def set_reservation_lookup(self, reserved_for: Callable[[int], str | None]) -> None:
        """Who holds a GPU's reservation, if anyone (for the idle/waste rule)."""
        self._reserved_for = reserved_for

    def set_health_lookup(self, health_of: Callable[[int], GpuCondition | None]) -> None:
        """A GPU's health condition now, if judged (for the gpu_health rules)."""
        self._health_of = health_of

    def report_unkillable(self, gpu: int, pid: int, summary: str) -> None:
        """A process survived KILL: a critical alert while it stays on the GPU."""
        with self._lock:
            self._unkillable[f"unkillable/gpu{gpu}/pid{pid}"] = (gpu, pid, summary)

    def reconfigure(self, settings: AlertSettings) -> None:
        """Judge by `settings` from the next tick on, keeping every detector's state (see
        LiveRules): firing alerts stay firing while their condition holds."""
        with self._lock:
            self._rules.point(settings)

    def record_start(self, summary: str) -> None:
        self._commit([self._event(pb.EVENT_KIND_DAEMON_STARTED, None, summary)], [])

    # -- evaluation ----------------------------------------------------------

    def evaluate(
        self,
        readings: Sequence[GpuReading],
        processes: Mapping[int, Sequence[ProcessReading]],
    ) -> None:
        """Judge one tick: raise, change and clear alerts; journal what happened."""
        now_s = self._clock()
        with self._lock:
            findings = self._findings(now_s, readings, processes)
            events, changed = self._apply(now_s, findings)
            events += self._gpu_health_events(readings)
            ended, records = self._ended_silences(int(now_s * 1000))
            updates = self._silence_updates(int(now_s * 1000))
            for alert, _event in updates:
                self._active[alert.key] = alert
            events += ended + [event for _alert, event in updates]
            changed = list({a.key: a for a in [*changed, *(a for a, _ in updates)]}.values())
        self._commit(events, changed, records)

    def _findings(
        self,
        now_s: float,
        readings: Sequence[GpuReading],
        processes: Mapping[int, Sequence[ProcessReading]],
    ) -> dict[str, Finding]:
        findings: dict[str, Finding] = {}
        for reading in readings:
            tick = GpuTick(
                now_s, reading, self._facts.get(reading.index), processes.get(reading.index, ()),
                self._reserved_for(reading.index),  # a reserved GPU left idle is waste too
                self._health_of(reading.index),
            )  # fmt: skip
            for detector in self._detectors:
                findings.update((f.key, f) for f in detector.evaluate(tick))
        findings.update(self._unkillable_findings(processes))
        if self._backend_problem is not None:
            summary = f"GPU backend degraded: {self._backend_problem}"
            findings["backend_degraded"] = Finding(
                "backend_degraded", "backend_degraded", Severity.CRITICAL, None, None, "", summary
            )
        disk_problem = self._journal.problem or self._audit_problem()
        if disk_problem is not None:
            # Changes are refused while the journal cannot be written: say so where
            # operators look (alert list, notifications, Alertmanager, /metrics).
            summary = f"{disk_problem}; reads are served, changes refused"
            findings["state_disk"] = Finding(
                "state_disk", "state_disk", Severity.CRITICAL, None, None, "", summary
            )
        return findings

    def _unkillable_findings(
        self, processes: Mapping[int, Sequence[ProcessReading]]
    ) -> dict[str, Finding]:
        found = {}
        for key, (gpu, pid, summary) in list(self._unkillable.items()):
            if any(p.pid == pid for p in processes.get(gpu, ())):
                found[key] = Finding(
                    key, "unkillable", Severity.CRITICAL, gpu, None, "", summary, pid
                )
            else:
                del self._unkillable[key]  # it is gone at last
        return found

    def _apply(
        self, now_s: float, findings: dict[str, Finding]
    ) -> tuple[list[pb.Event], list[AlertRecord]]:
        now_ms = int(now_s * 1000)
        events: list[pb.Event] = []
        changed: list[AlertRecord] = []
        for key, finding in findings.items():
            alert = self._active.get(key)
            self._carried.discard(key)
            if alert is None:
                alert = self._active[key] = self._new_alert(finding, now_ms)
                # Raised inside a maintenance window: raised silenced, no popup.
                set_silenced(alert, self._silencing.silenced_as(alert, now_ms))
                if finding.value is not None:
                    self._announced_peak[key] = (finding.value, now_s)
                events.append(self._alert_event(pb.EVENT_KIND_ALERT_RAISED, alert))
                changed.append(alert)
            elif self._update(alert, finding, now_ms) or self._new_peak(alert, now_s):
                events.append(self._alert_event(pb.EVENT_KIND_ALERT_CHANGED, alert))
                changed.append(alert)
        in_grace = now_s - self._started_s < RESTART_GRACE_S
        for key in [k for k in self._active if k not in findings]:
            if key in self._carried and in_grace:
                continue
            alert = self._active.pop(key)
            self._carried.discard(key)
            self._announced_peak.pop(key, None)
            alert.firing, alert.cleared_unix_ms, alert.updated_unix_ms = False, now_ms, now_ms
            events.append(self._alert_event(pb.EVENT_KIND_ALERT_CLEARED, alert))
            changed.append(alert)
        return events, changed

    def _new_alert(self, finding: Finding, now_ms: int) -> AlertRecord:
        alert_id = f"a-{self._next_number}"
        self._next_number += 1
        static = self._facts.get(finding.gpu_index) if finding.gpu_index is not None else None
        return AlertRecord(
            id=alert_id, key=finding.key, rule=finding.rule, severity=finding.severity,
            firing=True, gpu_index=finding.gpu_index, gpu_uuid=static.uuid if static else "",
            pid=finding.pid, value=finding.value, unit=finding.unit, summary=finding.summary,
            started_unix_ms=now_ms, updated_unix_ms=now_ms, peak_value=finding.value,
            occurrences=max(1, finding.new_occurrences),
        )  # fmt: skip

    @staticmethod
    def _update(alert: AlertRecord, finding: Finding, now_ms: int) -> bool:
        """Refresh the alert; True when the change is worth an event (severity, occurrences)."""
        alert.value, alert.summary = finding.value, finding.summary
        if finding.value is not None and (
            alert.peak_value is None or finding.value > alert.peak_value
        ):
            alert.peak_value = finding.value
        worth_an_event = finding.severity != alert.severity or finding.new_occurrences > 0
        alert.severity = finding.severity
        alert.occurrences += finding.new_occurrences
        if worth_an_event:
            alert.updated_unix_ms = now_ms
        return worth_an_event

    def _new_peak(self, alert: AlertRecord, now_s: float) -> bool:
        """True when the alert's peak beats the last one announced by enough, not too soon."""
        if alert.peak_value is None:
            return False
        announced, at_s = self._announced_peak.get(alert.key, (alert.peak_value, now_s))
        self._announced_peak.setdefault(alert.key, (announced, at_s))
        step = max(PEAK_STEP, abs(announced) * PEAK_STEP_FRACTION)
        if alert.peak_value < announced + step or now_s - at_s < PEAK_EVENT_MIN_S:
            return False
        self._announced_peak[alert.key] = (alert.peak_value, now_s)
        return True

    def _gpu_health_events(self, readings: Iterable[GpuReading]) -> list[pb.Event]:
        events = []
        for reading in readings:
            lost = reading.health is GpuHealth.LOST
            if lost and reading.index not in self._lost:
                self._lost.add(reading.index)
                summary = f"GPU {reading.index} lost: {reading.error or 'fell off the bus'}"
                events.append(self._event(pb.EVENT_KIND_GPU_LOST, reading.index, summary))
            elif not lost and reading.index in self._lost:
                self._lost.discard(reading.index)
                summary = f"GPU {reading.index} answers again"
                events.append(self._event(pb.EVENT_KIND_GPU_RECOVERED, reading.index, summary))
        return events

    # -- silences ------------------------------------------------------------

    def _silence_updates(self, now_ms: int, actor: str = "") -> list[tuple[AlertRecord, pb.Event]]:
        """Alerts whose silence changed (new copies, not applied yet), each with its event."""
        return [
            (c.alert, self._alert_event(c.kind, c.alert, c.summary, actor))
            for c in self._silencing.changes(self._active.values(), now_ms)
        ]

    def _ended_silences(self, now_ms: int) -> tuple[list[pb.Event], list[StoredRecord]]:
        """SILENCE_EXPIRED for silences that reached their end time."""
        events, records = [], []
        for silence in self._silencing.ended(now_ms):
            summary = f"silence {silence.id} ended at {rfc3339(silence.ends_unix_ms)}"
            events.append(self._silence_event(pb.EVENT_KIND_SILENCE_EXPIRED, silence, summary))
            records.append(SilenceBook.stored(silence, expiry_announced=True))
        return events, records

    def create_silence(
        self,
        matchers: Sequence[tuple[str, str]],
        starts_unix_ms: int,
        ends_unix_ms: int,
        duration_s: int,
        comment: str,
        actor: str,
    ) -> Silence:
        """Store a matcher silence and silence what it covers; BadSilence if malformed."""
        checked = check_matchers(matchers)
        check_text(comment, actor)
        with self._lock:
            now_ms = int(self._clock() * 1000)
            window = check_window(now_ms, starts_unix_ms, ends_unix_ms, duration_s)
            if self._silencing.book.open_count >= MAX_OPEN:
                raise TooManySilences(
                    f"this node has {MAX_OPEN} pending or active silences already, the most it "
                    "keeps: expire some (ListSilences) or widen one's matchers"
                )
            silence = Silence(
                self._silencing.book.next_id(), checked, window.starts_unix_ms, window.ends_unix_ms,
                actor, comment, now_ms,
            )  # fmt: skip
            event = self._silence_event(
                pb.EVENT_KIND_SILENCE_CREATED, silence, f"{silence.describe()}", actor
            )
            self._silencing.book.put(silence)
            updated = self._store_silence_change(
                now_ms, event, SilenceBook.stored(silence, expiry_announced=False), actor,
                undo=lambda: self._silencing.book.drop(silence.id),
            )  # fmt: skip
        self._after_silence_change(updated)
        return silence

    def expire_silence(self, silence_id: str, actor: str) -> Silence:
        """End a pending or active silence now; UnknownSilence, SilenceEnded if it has."""
        with self._lock:
            silence = self._silencing.book.get(silence_id)
            if silence is None:
                raise UnknownSilence(f"no silence {silence_id} on this node (see ListSilences)")
            now_ms = int(self._clock() * 1000)
            if silence.state(now_ms) is SilenceState.EXPIRED:
                by = f" (ended by {silence.expired_by})" if silence.expired_by else ""
                raise SilenceEnded(
                    f"silence {silence_id} already expired at {rfc3339(silence.ends_unix_ms)}{by}"
                )
            ended = silence.expired(now_ms, actor)
            event = self._silence_event(
                pb.EVENT_KIND_SILENCE_EXPIRED, ended, f"silence {silence_id} ended by {actor}",
                actor,
            )  # fmt: skip
            self._silencing.book.put(ended)
            updated = self._store_silence_change(
                now_ms, event, SilenceBook.stored(ended, expiry_announced=True), actor,
                undo=lambda: self._silencing.book.put(silence),
            )  # fmt: skip
            self._silencing.book.announced(silence_id)
        self._after_silence_change(updated)
        return ended

    def _store_silence_change(
        self, now_ms: int, event: pb.Event, record: StoredRecord, actor: str,
        undo: Callable[[], None],
    ) -> list[AlertRecord]:  # fmt: skip
        """Journal a silence's change with the alerts it (un)silences, all or nothing."""
        try:
            updates = self._silence_updates(now_ms, actor)
            alerts = [a for a, _ in updates]
            self._journal.record(
                [event, *(e for _, e in updates)], [alert_message(a) for a in alerts], [record]
            )
        except BaseException:
            undo()
            raise
        for alert in alerts:
            self._active[alert.key] = alert
        return alerts

    def _after_silence_change(self, updated: list[AlertRecord]) -> None:
        self._notify([replace(a) for a in updated])
        self._mirror_changed(force=True)

    def silences(self, include_expired: bool, limit: int) -> list[Silence]:
        """Pending and active silences (soonest end first), then expired ones, newest first."""
        with self._lock:
            now_ms = int(self._clock() * 1000)
            live = self._silencing.book.live(now_ms)
            return live + (self._silencing.book.expired(now_ms, limit) if include_expired else [])

    def am_silences(self) -> list[AmSilence]:
        """What Alertmanager should hold: pending and active matcher silences, and the own
        silences of firing alerts (by the alert's exact label set)."""
        with self._lock:
            return self._silencing.am_view(self._active.values(), int(self._clock() * 1000))

    def _mirror_changed(self, force: bool = False) -> None:
        """Tell the silence listeners (the Alertmanager pusher) when the view changed."""
        with self._lock:
            view = self._silencing.am_view(self._active.values(), int(self._clock() * 1000))
            changed, self._mirrored = force or view != self._mirrored, view
        if changed:
            for listener in self._silence_listeners:
                listener()

    # -- actions from people -------------------------------------------------

    def acknowledge(self, alert_id: str, actor: str, comment: str) -> AlertRecord:
        with self._lock:
            alert = self._firing(alert_id)
            if alert.acknowledged:
                return replace(alert)  # acknowledging twice changes nothing
            now_ms = int(self._clock() * 1000)
            updated = replace(
                alert,
                acknowledged_by=actor,
                acknowledged_unix_ms=now_ms,
                acknowledge_comment=comment,
                updated_unix_ms=now_ms,
            )
            summary = f"acknowledged by {actor}" + (f": {comment}" if comment else "")
            event = self._alert_event(pb.EVENT_KIND_ALERT_ACKNOWLEDGED, updated, summary, actor)
            self._write_now([event], [updated])
            self._active[updated.key] = updated
        self._notify([updated])
        return replace(updated)

    def silence(self, alert_id: str, duration_s: int, reason: str, actor: str) -> AlertRecord:
        """The alert's own silence: set for `duration_s`, or lifted (0). A matcher silence
        that covers the alert and ends later still keeps it quiet."""
        if not 0 <= duration_s <= MAX_SILENCE_S:
            raise BadAlertRequest(
                f"duration_s must be 0 (lift) .. {MAX_SILENCE_S} (7 days), got {duration_s}"
            )
        if duration_s and not reason.strip():
            raise BadAlertRequest("a silence needs a reason: say why this alert may stay quiet")
        with self._lock:
            alert = self._firing(alert_id)
            now_ms = int(self._clock() * 1000)
            own = AlertSilence(now_ms + duration_s * 1000, actor, reason, now_ms)
            before = self._silencing.set_own(alert.key, own if duration_s else None)
            wanted = self._silencing.silenced_as(alert, now_ms)
            updated = replace(alert, updated_unix_ms=now_ms)
            set_silenced(updated, wanted)
            kind = pb.EVENT_KIND_ALERT_SILENCED if wanted[0] else pb.EVENT_KIND_ALERT_UNSILENCED
            summary = (
                f"silenced by {actor} for {duration_s} s: {reason}"
                if duration_s
                else f"silence lifted by {actor}"
            )
            if wanted[3]:
                summary += f"; {describe_silenced(wanted)}"
            try:
                self._write_now([self._alert_event(kind, updated, summary, actor)], [updated])
            except BaseException:
                self._silencing.set_own(alert.key, before)
                raise
            self._active[updated.key] = updated
        self._after_silence_change([updated])
        return replace(updated)

    def _firing(self, alert_id: str) -> AlertRecord:
        for alert in self._active.values():
            if alert.id == alert_id:
                return alert
        if self._journal.alert(alert_id) is not None:
            raise AlertNotFiring(f"alert {alert_id} has already cleared")
        raise UnknownAlert(f"no alert {alert_id} on this node")

    # -- queries -------------------------------------------------------------

    def firing(self) -> list[AlertRecord]:
        with self._lock:
            return [replace(a) for a in self._active.values()]

    # -- journal -------------------------------------------------------------

    def _event(
        self, kind: pb.EventKind.ValueType, gpu: int | None, summary: str, actor: str = ""
    ) -> pb.Event:
        event = pb.Event(
            time_unix_ms=int(self._clock() * 1000), kind=kind, summary=summary, actor=actor
        )  # type: ignore[arg-type]
        if gpu is not None:
            event.gpu_index = gpu
        return event

    def _alert_event(
        self, kind: pb.EventKind.ValueType, alert: AlertRecord, summary: str = "", actor: str = ""
    ) -> pb.Event:
        event = self._event(kind, alert.gpu_index, summary or alert.summary, actor)
        event.alert.CopyFrom(alert_message(alert))
        return event

    def _silence_event(
        self, kind: pb.EventKind.ValueType, silence: Silence, summary: str, actor: str = ""
    ) -> pb.Event:
        event = self._event(kind, None, summary, actor)
        event.silence.CopyFrom(silence_message(silence))
        return event

    def _write_now(self, events: list[pb.Event], alerts: list[AlertRecord]) -> None:
        """For people's actions: written before the caller is told it worked."""
        self._journal.record(events, [alert_message(a) for a in alerts])

    def _commit(
        self,
        events: list[pb.Event],
        changed: list[AlertRecord],
        records: Sequence[StoredRecord] = (),
    ) -> None:
        # The journal holds what it cannot write yet and writes it before anything
        # else once it can: held here, a reservation expiring after the disk had
        # room again would get a lower seq than the older alert events.
        self._journal.record_or_hold(events, [alert_message(a) for a in changed], records)
        self._notify([replace(a) for a in changed])
        if self._silence_listeners:
            self._mirror_changed()

    def _notify(self, alerts: list[AlertRecord]) -> None:
        if alerts:
            for listener in self._listeners:
                listener(alerts)
