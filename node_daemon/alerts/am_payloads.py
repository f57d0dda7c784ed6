"""What the pusher POSTs to /api/v2/alerts: labels, annotations and times of each alert.

Labels identify an alert in Alertmanager, so they hold only what is stable for the
alert's life (node_daemon.alerts.alertmanager says which); value, peak, unit,
occurrences and `last_confirmed` go into the annotations.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpufleet.v1.xid_catalogue import CATALOGUE_URL, describe_xid, xid_advice, xid_entry
from node_daemon.alerts.am_silences import rfc3339_ms as rfc3339
from node_daemon.alerts.model import AlertRecord
from node_daemon.alerts.wording import counted

Payload = dict[str, object]
WATCHDOG_ALERTNAME = "GpufleetWatchdog"
WATCHDOG_SEVERITY = "none"
# Only gpufleet sets it: how the start-up sweep tells this node's alerts from others'.
CONFIRMED_ANNOTATION = "last_confirmed"


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


def alert_annotations(alert: AlertRecord, confirmed_unix_ms: float) -> dict[str, str]:
    """Summary, a one-line description (rule, value and peak with unit, occurrences), when sent.

    An Xid alert says instead what its code means, its likely cause and what to do, in
    the description and in annotations of their own (`xid_meaning`, `xid_cause`,
    `xid_action`) for templates and routes.
    """
    if alert.rule == "xid" and alert.value is not None:
        return {"summary": alert.summary, **xid_annotations(int(alert.value), alert.occurrences),
                CONFIRMED_ANNOTATION: rfc3339(confirmed_unix_ms)}  # fmt: skip
    value = "" if alert.value is None else f", value {alert.value:g}{alert.unit}"
    peak = "" if alert.peak_value is None else f", peak {alert.peak_value:g}{alert.unit}"
    description = f"{alert.rule}{value}{peak}, occurrences {alert.occurrences}"
    return {
        "summary": alert.summary,
        "description": description,
        CONFIRMED_ANNOTATION: rfc3339(confirmed_unix_ms),
    }


def xid_annotations(code: int, occurrences: int) -> dict[str, str]:
    """The catalogue's words for an Xid: a description that says what to do, and its parts."""
    entry = xid_entry(code)
    seen = f"seen {counted(occurrences, 'time')}"
    if entry is None:
        return {
            "description": f"{describe_xid(code)} ({seen}). {xid_advice(code)}",
            "xid_meaning": "not in the catalogue", "xid_cause": "unknown",
            "xid_action": f"look it up in NVIDIA's Xid catalogue, {CATALOGUE_URL}",
        }  # fmt: skip
    return {
        "description": f"{describe_xid(code)} ({seen}). {entry.advice}",
        "xid_meaning": entry.meaning,
        "xid_cause": entry.cause_words,
        "xid_action": entry.action.words,
    }


def alert_payload(
    alert: AlertRecord, labels: Mapping[str, str], ends_unix_ms: float, confirmed_unix_ms: float
) -> Payload:
    """One element of the JSON list POSTed to /api/v2/alerts."""
    # Alertmanager rejects an alert that ends before it starts.
    ends_unix_ms = max(ends_unix_ms, alert.started_unix_ms)
    return {
        "labels": dict(labels),
        "annotations": alert_annotations(alert, confirmed_unix_ms),
        "startsAt": rfc3339(alert.started_unix_ms),
        "endsAt": rfc3339(ends_unix_ms),
    }


def watchdog_labels(node_labels: Mapping[str, str]) -> dict[str, str]:
    return {**node_labels, "alertname": WATCHDOG_ALERTNAME, "severity": WATCHDOG_SEVERITY}


def watchdog_payload(
    node_labels: Mapping[str, str], started_ms: float, ends_ms: float, now_ms: float
) -> Payload:
    """The heartbeat: firing while the daemon lives, ending by itself when it stops."""
    node = node_labels.get("node", "?")
    return {
        "labels": watchdog_labels(node_labels),
        "annotations": {
            "summary": f"gpufleet daemon on {node} is alive",
            "description": "Always firing while the node daemon runs (a dead-man's switch). "
            "Route it to a heartbeat receiver that pages when it stops arriving: the daemon "
            "is dead, hung or cut off from Alertmanager.",
            CONFIRMED_ANNOTATION: rfc3339(now_ms),
        },
        "startsAt": rfc3339(started_ms),
        "endsAt": rfc3339(max(ends_ms, started_ms)),
    }


def stale_payloads(
    held: list[object], node: str, live: set[frozenset[tuple[str, str]]], now_ms: float
) -> list[Payload]:
    """Resolutions for the alerts `held` by Alertmanager that a gpufleet daemon on `node`
    pushed (they carry `last_confirmed`) and whose label set is not `live`."""
    now = rfc3339(now_ms)
    stale: list[Payload] = []
    for alert in held:
        if not isinstance(alert, dict):
            continue
        labels, annotations = alert.get("labels") or {}, alert.get("annotations") or {}
        ours = CONFIRMED_ANNOTATION in annotations and labels.get("node") == node
        if ours and frozenset(labels.items()) not in live:
            stale.append({
                "labels": labels, "annotations": {**annotations, CONFIRMED_ANNOTATION: now},
                "startsAt": alert.get("startsAt"), "endsAt": now,
            })  # fmt: skip
    return stale
