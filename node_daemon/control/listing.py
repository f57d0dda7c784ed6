"""How much of a node's workloads one ListWorkloads answer holds: at most LIST_BYTES.

A default gRPC client refuses an answer over 4 MiB, and a node that answers
more breaks every console's queue for that node. Queued and running
workloads always fit (a submit past QUEUE_BYTES is refused: `check_queue_room`);
ended ones fill the rest, newest first, and the oldest are left out of the
answer (not of the journal: usage and the audit log keep them).
"""

from __future__ import annotations

from collections.abc import Sequence

from gpufleet.v1 import node_pb2 as pb
from node_daemon.control.limits import LIST_BYTES, QUEUE_BYTES, RECORD_SLACK_BYTES
from node_daemon.control.records import Workload
from node_daemon.control.wire import workload_message
from node_daemon.errors import Refused

# A repeated field's element costs its tag and its length's varint besides itself.
_ELEMENT_BYTES = 6


class QueueFull(Refused):
    """The node's queued and running workloads would no longer fit one listing."""


def listed_bytes(message: pb.Workload) -> int:
    """What `message` adds to a ListWorkloadsResponse."""
    return message.ByteSize() + _ELEMENT_BYTES


def queue_bytes(workloads: Sequence[Workload]) -> int:
    """The current workloads' share of a listing, their placement notes' room included."""
    return sum(listed_bytes(workload_message(w)) + RECORD_SLACK_BYTES for w in workloads)


def check_queue_room(current: Sequence[Workload], new: Workload) -> None:
    """QueueFull when `new` would take the node's queue past QUEUE_BYTES."""
    taken, adds = queue_bytes(current), queue_bytes([new])
    if taken + adds > QUEUE_BYTES:
        raise QueueFull(
            f"this node's queue is full: its queued and running workloads take {taken} bytes "
            f"and this one {adds}, past the {QUEUE_BYTES} a listing of the queue may hold "
            "(docs/control.md, Limits); wait for some to start or end, or use another node"
        )


def within_budget(
    messages: Sequence[pb.Workload], ended: Sequence[bool], budget: int = LIST_BYTES
) -> tuple[list[pb.Workload], int]:
    """The messages one answer holds, in their order, and how many were left out.

    Current workloads (`ended` False) come first, then ended ones newest first
    (the later in `messages`, the newer), while they fit `budget`.
    """
    order = [i for i, e in enumerate(ended) if not e] + [
        i for i in reversed(range(len(messages))) if ended[i]
    ]
    kept: set[int] = set()
    used = 0
    for i in order:
        size = listed_bytes(messages[i])
        if used + size <= budget:
            kept.add(i)
            used += size
    return [m for i, m in enumerate(messages) if i in kept], len(messages) - len(kept)
