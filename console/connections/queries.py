"""Queries the console asks of nodes: the audit log, usage, silences. Off the GUI thread.

Like ControlActions, each call returns at once. The reply is decoded on the
network thread and comes back as a QueryResult through the inbox, tagged with
the query id the asker gave (a QueryRound hands them out).
"""

from __future__ import annotations

from console.connections.channel import CALL_DEADLINE_S
from console.connections.decode import decode_audit, decode_event, decode_silences, decode_usage
from console.connections.manager import ConnectionManager
from console.fleet.audit import AuditFilter
from console.fleet.incident import Window, history_gaps
from console.fleet.query_round import next_query_id
from console.fleet.timeline import MARKED_KINDS, PastEvents, PastGaps
from console.fleet.usage import GROUPINGS, UsageQuery
from gpufleet.v1 import node_pb2 as pb

# Reports over months of usage take longer than a click's deadline.
QUERY_DEADLINE_S = max(CALL_DEADLINE_S, 30.0)
# Expired silences listed too, so the Silences view shows what ended lately and who ended it.
SILENCE_HISTORY = 100
# A window's marks from one node: a busy month's acknowledgements, drains and raises.
PAST_EVENTS_LIMIT = 2000
# A window's history, looked at for gaps, in this many points of one GPU's temperature
# (a month in 11-minute steps, 6 hours in 5 s; about 100 KB a node).
GAP_POINTS = 4000
_MARKED = [pb.EventKind.Value(f"EVENT_KIND_{kind.upper()}") for kind in MARKED_KINDS]
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

    def past_events(self, target: str, since_ms: int, until_ms: int, query_id: int) -> None:
        """A node's events of the timeline's marked kinds within [since, until] (ListEvents);
        the answer is a PastEvents."""
        request = pb.ListEventsRequest(since_unix_ms=since_ms, until_unix_ms=until_ms,
                                       kinds=_MARKED, limit=PAST_EVENTS_LIMIT)  # fmt: skip
        self._connections.query(
            target,
            f"the events of {target} in the timeline's window",
            lambda stub: stub.ListEvents(request, timeout=QUERY_DEADLINE_S),
            lambda _target, reply: PastEvents(
                target, tuple(decode_event(target, e).event for e in reply.events), reply.truncated
            ),
            query_id,
        )

    def past_gaps(self, target: str, gpu: int, since_ms: int, until_ms: int, query_id: int) -> None:
        """Where the node's history has no samples within [since, until] (QueryHistory of
        one GPU's temperature: the node samples all its GPUs at once); a PastGaps."""
        request = pb.QueryHistoryRequest(start_unix_ms=since_ms, end_unix_ms=until_ms,
                                         metrics=["temp_gpu_c"], gpu_indices=[gpu],
                                         max_points=GAP_POINTS)  # fmt: skip
        window = Window(since_ms, until_ms)

        def decode(_target: str, reply: pb.QueryHistoryResponse) -> PastGaps:
            gaps = history_gaps(target, reply.timestamps_unix_ms, reply.step_ms, window)
            return PastGaps(target, tuple((g.time_ms, g.until_ms or g.time_ms) for g in gaps))

        self._connections.query(
            target,
            f"the history of {target} in the timeline's window",
            lambda stub: stub.QueryHistory(request, timeout=QUERY_DEADLINE_S),
            decode,
            query_id,
        )
