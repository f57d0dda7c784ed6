"""MomentQueries: incident replay's asks, each node's GetStateAt, sent off the GUI thread.

The answer is decoded here, on the network thread, into the fleet model's own records
(console.fleet.moment.NodeMoment: ring rows and snapshots as decode_batch makes them of
a tick, alerts, reservations and workloads as decode makes them of a listing), and
comes back as a QueryResult through the inbox; the frame pump applies it like any
update, so the grid, the alert table and the panels show it with the next frame.
"""

from __future__ import annotations

from console.connections.decode import (
    decode_alert,
    decode_batch,
    decode_reservation,
    decode_workload,
)
from console.connections.manager import ConnectionManager
from console.fleet.moment import NodeMoment
from gpufleet.v1 import node_pb2 as pb

# A moment a month back answers in milliseconds (docs/daemon.md, "State at a moment");
# a node that takes longer than a click's deadline is said to lag, not waited for.
MOMENT_DEADLINE_S = 10.0


def decode_state_at(target: str, reply: pb.NodeStateAt, gpu_count: int) -> NodeMoment:
    """A node's NodeStateAt as the fleet model shows a tick: `gpu_count` ring rows (NaN
    where the history holds no point near the moment) and snapshots for the GPUs it
    answered for, with the journal's alerts, reservations and workloads then."""
    batch = pb.SampleBatch(timestamp_unix_ms=reply.at_unix_ms)
    batch.gpus.extend(gpu.sample for gpu in reply.gpus)
    tick = decode_batch(target, batch, gpu_count)
    return NodeMoment(
        target, reply.at_unix_ms, tick.rows,
        {snap.index: snap for snap in tick.gpus if snap.index < gpu_count},
        alerts=tuple(decode_alert(target, a) for a in reply.alerts),
        reservations=tuple(decode_reservation(target, r) for r in reply.reservations),
        workloads=tuple(decode_workload(target, w) for w in reply.workloads),
        tier=reply.tier, step_s=reply.step_ms / 1000.0, note=reply.note,
    )  # fmt: skip


class MomentQueries:
    def __init__(self, connections: ConnectionManager) -> None:
        self._connections = connections

    def ask(self, target: str, at_ms: int, gpu_count: int, query_id: int) -> None:
        """The node at `at_ms`; its NodeMoment (or why not) comes back as a QueryResult."""
        request = pb.GetStateAtRequest(at_unix_ms=at_ms)
        self._connections.query(
            target, f"the state of {target} at a moment",
            lambda stub: stub.GetStateAt(request, timeout=MOMENT_DEADLINE_S),
            lambda _target, reply: decode_state_at(target, reply, gpu_count), query_id,
        )  # fmt: skip
