"""What a person can ask a node to do from the console, sent off the GUI thread.

Each action returns at once; its CommandResult arrives through the inbox, and
the window shows it (success, or the daemon's own error message).
"""

from __future__ import annotations

import getpass

from console.connections.channel import CALL_DEADLINE_S
from console.connections.manager import ConnectionManager
from console.fleet.alert_rows import AlertRow
from console.fleet.silence_draft import SilenceRequest
from console.fleet.silences import SilenceRow, matchers_text
from gpufleet.v1 import node_pb2 as pb


def default_actor() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "console"


class AlertActions:
    def __init__(self, connections: ConnectionManager, actor: str | None = None) -> None:
        self._connections = connections
        self.actor = actor or default_actor()

    def acknowledge(self, alert: AlertRow, comment: str = "") -> None:
        request = pb.AcknowledgeAlertRequest(alert_id=alert.id, comment=comment, actor=self.actor)
        self._connections.request(
            alert.target,
            f"acknowledge {alert.rule} on {alert.target}",
            lambda stub: stub.AcknowledgeAlert(request, timeout=CALL_DEADLINE_S),
        )

    def silence(self, alert: AlertRow, duration_s: int, reason: str) -> None:
        request = pb.SilenceAlertRequest(
            alert_id=alert.id, duration_s=duration_s, reason=reason, actor=self.actor
        )
        verb = f"silence {alert.rule} for {duration_s // 60} min" if duration_s else "lift silence"
        self._connections.request(
            alert.target,
            f"{verb} on {alert.target}",
            lambda stub: stub.SilenceAlert(request, timeout=CALL_DEADLINE_S),
        )


class SilenceActions:
    """Matcher silences: created on each node they are meant for, expired one by one."""

    def __init__(self, connections: ConnectionManager, actor: str | None = None) -> None:
        self._connections = connections
        self.actor = actor or default_actor()

    def create(self, target: str, wanted: SilenceRequest) -> None:
        request = pb.CreateSilenceRequest(
            matchers=[pb.SilenceMatcher(label=m.label, pattern=m.pattern) for m in wanted.matchers],
            starts_unix_ms=wanted.starts_unix_ms, ends_unix_ms=wanted.ends_unix_ms,
            comment=wanted.comment, actor=self.actor,
        )  # fmt: skip
        self._connections.request(
            target,
            f"silence {matchers_text(wanted.matchers)} on {target}",
            lambda stub: stub.CreateSilence(request, timeout=CALL_DEADLINE_S),
        )

    def expire(self, silence: SilenceRow) -> None:
        request = pb.ExpireSilenceRequest(silence_id=silence.id, actor=self.actor)
        self._connections.request(
            silence.target,
            f"expire silence {matchers_text(silence.matchers)} on {silence.target}",
            lambda stub: stub.ExpireSilence(request, timeout=CALL_DEADLINE_S),
        )
