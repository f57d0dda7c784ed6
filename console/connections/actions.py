"""What a person can ask a node to do from the console, sent off the GUI thread.

Each action returns at once; its CommandResult arrives through the inbox, and
the window shows it (success, or the daemon's own error message).
"""

from __future__ import annotations

import getpass
from typing import Any

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


class NodeActions:
    """Actions sent as `actor`: each one unary call of NodeService, answered in the inbox.

    The alert, silence, control and health actions differ in their requests and
    what they say they do; sending one is this.
    """

    def __init__(self, connections: ConnectionManager, actor: str | None = None) -> None:
        self._connections = connections
        self.actor = actor or default_actor()

    def _send(
        self, target: str, what: str, method: str, request: Any,
        subject: str = "", timeout_s: float = CALL_DEADLINE_S,
    ) -> None:  # fmt: skip
        """Call NodeService's `method` on `target` with `request`; `what` names it in the result."""
        self._connections.request(
            target, what, lambda stub: getattr(stub, method)(request, timeout=timeout_s), subject
        )


class AlertActions(NodeActions):
    def acknowledge(self, alert: AlertRow, comment: str = "") -> None:
        request = pb.AcknowledgeAlertRequest(alert_id=alert.id, comment=comment, actor=self.actor)
        what = f"acknowledge {alert.rule} on {alert.target}"
        self._send(alert.target, what, "AcknowledgeAlert", request)

    def silence(self, alert: AlertRow, duration_s: int, reason: str) -> None:
        request = pb.SilenceAlertRequest(
            alert_id=alert.id, duration_s=duration_s, reason=reason, actor=self.actor
        )
        verb = f"silence {alert.rule} for {duration_s // 60} min" if duration_s else "lift silence"
        self._send(alert.target, f"{verb} on {alert.target}", "SilenceAlert", request)


class SilenceActions(NodeActions):
    """Matcher silences: created on each node they are meant for, expired one by one."""

    def create(self, target: str, wanted: SilenceRequest) -> None:
        request = pb.CreateSilenceRequest(
            matchers=[pb.SilenceMatcher(label=m.label, pattern=m.pattern) for m in wanted.matchers],
            starts_unix_ms=wanted.starts_unix_ms, ends_unix_ms=wanted.ends_unix_ms,
            comment=wanted.comment, actor=self.actor,
        )  # fmt: skip
        what = f"silence {matchers_text(wanted.matchers)} on {target}"
        self._send(target, what, "CreateSilence", request)

    def expire(self, silence: SilenceRow) -> None:
        request = pb.ExpireSilenceRequest(silence_id=silence.id, actor=self.actor)
        what = f"expire silence {matchers_text(silence.matchers)} on {silence.target}"
        self._send(silence.target, what, "ExpireSilence", request)
