"""Queries the console asks of nodes: the audit log and usage. Off the GUI thread.

Like ControlActions, each call returns at once. The reply is decoded on the
network thread and comes back as a QueryResult through the inbox, tagged with
the query id the asker gave (a QueryRound hands them out).
"""

from __future__ import annotations

from console.connections.channel import CALL_DEADLINE_S
from console.connections.manager import ConnectionManager
from console.fleet.audit import AuditFilter, decode_audit
from console.fleet.usage import UsageQuery, decode_usage

# Reports over months of usage take longer than a click's deadline.
QUERY_DEADLINE_S = max(CALL_DEADLINE_S, 30.0)


class FleetQueries:
    def __init__(self, connections: ConnectionManager) -> None:
        self._connections = connections

    def audit(self, target: str, wanted: AuditFilter, query_id: int) -> None:
        request = wanted.request()
        self._connections.query(
            target,
            f"audit log of {target}",
            lambda stub: stub.QueryAudit(request, timeout=QUERY_DEADLINE_S),
            decode_audit,
            query_id,
        )

    def usage(self, target: str, wanted: UsageQuery, grouping: str, query_id: int) -> None:
        request = wanted.request(grouping)
        self._connections.query(
            target,
            f"usage by {grouping} of {target}",
            lambda stub: stub.QueryUsage(request, timeout=QUERY_DEADLINE_S),
            decode_usage,
            query_id,
        )
