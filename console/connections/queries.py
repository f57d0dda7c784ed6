"""Queries the console asks of nodes: the audit log, usage, silences. Off the GUI thread.

Like ControlActions, each call returns at once. The reply is decoded on the
network thread and comes back as a QueryResult through the inbox, tagged with
the query id the asker gave (a QueryRound hands them out).
"""

from __future__ import annotations

from console.connections.channel import CALL_DEADLINE_S
from console.connections.decode import decode_audit, decode_silences, decode_usage
from console.connections.manager import ConnectionManager
from console.fleet.audit import AuditFilter
from console.fleet.query_round import next_query_id
from console.fleet.usage import GROUPINGS, UsageQuery
from gpufleet.v1 import node_pb2 as pb

# Reports over months of usage take longer than a click's deadline.
QUERY_DEADLINE_S = max(CALL_DEADLINE_S, 30.0)
# Expired silences listed too, so the Silences view shows what ended lately and who ended it.
SILENCE_HISTORY = 100
_GROUP_BY = {name: pb.UsageGrouping.Value(f"USAGE_GROUPING_{name.upper()}") for name in GROUPINGS}


def audit_request(wanted: AuditFilter) -> pb.QueryAuditRequest:
    return pb.QueryAuditRequest(
        from_unix_ms=wanted.from_unix_ms, to_unix_ms=wanted.to_unix_ms, user=wanted.user.strip(),
        method=wanted.action.strip(), limit=wanted.limit,
    )  # fmt: skip


def usage_request(wanted: UsageQuery, grouping: str) -> pb.QueryUsageRequest:
    return pb.QueryUsageRequest(
        from_day=wanted.from_day, to_day=wanted.to_day, group_by=_GROUP_BY[grouping]
    )


class FleetQueries:
    def __init__(self, connections: ConnectionManager) -> None:
        self._connections = connections

    def audit(self, target: str, wanted: AuditFilter, query_id: int) -> None:
        request = audit_request(wanted)
        self._connections.query(
            target,
            f"audit log of {target}",
            lambda stub: stub.QueryAudit(request, timeout=QUERY_DEADLINE_S),
            decode_audit,
            query_id,
        )

    def usage(self, target: str, wanted: UsageQuery, grouping: str, query_id: int) -> None:
        request = usage_request(wanted, grouping)
        self._connections.query(
            target,
            f"usage by {grouping} of {target}",
            lambda stub: stub.QueryUsage(request, timeout=QUERY_DEADLINE_S),
            decode_usage,
            query_id,
        )

    def silences(self, target: str) -> None:
        """A node's silences; the answer (a SilenceListing) goes to the fleet model."""
        request = pb.ListSilencesRequest(include_expired=True, limit=SILENCE_HISTORY)
        self._connections.query(
            target,
            f"silences of {target}",
            lambda stub: stub.ListSilences(request, timeout=CALL_DEADLINE_S),
            decode_silences,
            next_query_id(),
        )
