"""Which events pop up: new alerts and escalations, once; not downgrades, acks or silences."""

from __future__ import annotations

import time
from dataclasses import replace

from console.fleet.alerts import AlertRow, EventRow, Severity
from console.fleet.model import FleetModel
from console.qt.alert_model import value_text
from console.qt.alert_notifier import AlertNotifier

TARGET = "n:1"


class Sink:
    available = True

    def __init__(self) -> None:
        self.shown: list[Severity] = []

    def show(self, alert: AlertRow, node_name: str) -> None:
        self.shown.append(alert.severity)


def alert(severity: Severity, **changes: object) -> AlertRow:
    now = int(time.time() * 1000)
    row = AlertRow(TARGET, "a-1", "gpu_temp/gpu0", "gpu_temp", severity, True, 0, "GPU-x", None,
                   86.0, "°C", "hot", now, now, None, 1, "", None, None, "", "")  # fmt: skip
    return replace(row, **changes)


def event(seq: int, kind: str, row: AlertRow) -> EventRow:
    return EventRow(TARGET, seq, row.updated_unix_ms, kind, 0, row.summary, "", row, False)


def notifier_with(events: list[EventRow]) -> tuple[AlertNotifier, Sink, list[str]]:
    fleet = FleetModel()
    fleet.add_node(TARGET)
    for e in events:
        fleet.alerts.add_event(e, "journal")
    sink, toasts = Sink(), []
    notifier = AlertNotifier(fleet, lambda a, title: toasts.append(title), [sink], lambda: None)
    notifier.on_events_arrived(events)
    return notifier, sink, toasts


def test_critical_then_downgrade_pops_up_once() -> None:
    critical = alert(Severity.CRITICAL)
    notifier, sink, toasts = notifier_with([event(1, "alert_raised", critical)])
    cooler = event(2, "alert_changed", replace(critical, severity=Severity.WARNING))
    notifier._fleet.alerts.add_event(cooler, "journal")  # the next frame
    notifier.on_events_arrived([cooler])
    assert sink.shown == [Severity.CRITICAL] and len(toasts) == 1


def test_escalation_pops_up_again() -> None:
    warning = alert(Severity.WARNING)
    notifier, sink, _ = notifier_with([event(1, "alert_raised", warning)])
    escalated = replace(warning, severity=Severity.CRITICAL)
    notifier._fleet.alerts.add_event(event(2, "alert_changed", escalated), "journal")
    notifier.on_events_arrived([event(2, "alert_changed", escalated)])
    assert sink.shown == [Severity.WARNING, Severity.CRITICAL]


def test_acknowledged_or_silenced_alerts_stay_quiet() -> None:
    acked = alert(Severity.CRITICAL, acknowledged_by="erin", acknowledged_unix_ms=1)
    _, sink, _ = notifier_with([event(1, "alert_raised", acked)])
    silenced = alert(Severity.CRITICAL, silenced_until_unix_ms=int(time.time() * 1000) + 60_000)
    _, sink2, _ = notifier_with([event(1, "alert_raised", silenced)])
    assert sink.shown == [] and sink2.shown == []


def test_the_alert_table_names_an_xid_by_its_code() -> None:
    xid = alert(Severity.WARNING, rule="xid", value=13.0, unit="xid")
    assert value_text(xid) == "Xid 13"
    assert value_text(replace(xid, occurrences=3)) == "Xid 13 x3"
    assert value_text(alert(Severity.CRITICAL)) == "86 °C"
