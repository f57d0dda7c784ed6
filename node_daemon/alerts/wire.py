"""AlertRecord <-> gpufleet.v1.Alert."""

from __future__ import annotations

from typing import Any

from google.protobuf.message import Message

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1.alert_severity import Severity
from node_daemon.alerts.model import AlertRecord

_OPTIONAL = (
    "gpu_index", "pid", "value", "cleared_unix_ms", "acknowledged_unix_ms",
    "silenced_until_unix_ms", "peak_value",
)  # fmt: skip
_PLAIN = (
    "id", "key", "rule", "gpu_uuid", "unit", "summary", "started_unix_ms", "updated_unix_ms",
    "occurrences", "acknowledged_by", "acknowledge_comment", "silenced_by", "silence_reason",
    "silence_id",
)  # fmt: skip


def alert_message(alert: AlertRecord) -> pb.Alert:
    message = pb.Alert(
        severity=pb.Severity.ValueType(int(alert.severity)),
        state=pb.ALERT_STATE_FIRING if alert.firing else pb.ALERT_STATE_CLEARED,
        **{name: getattr(alert, name) for name in _PLAIN},
    )
    for name in _OPTIONAL:
        value = getattr(alert, name)
        if value is not None:
            setattr(message, name, value)
    return message


def alert_record(message: pb.Alert) -> AlertRecord:
    any_message: Message = message  # HasField by name
    optional: dict[str, Any] = {
        n: getattr(message, n) if any_message.HasField(n) else None for n in _OPTIONAL
    }
    return AlertRecord(
        severity=Severity(message.severity),
        firing=message.state == pb.ALERT_STATE_FIRING,
        **{name: getattr(message, name) for name in _PLAIN},
        **optional,
    )
