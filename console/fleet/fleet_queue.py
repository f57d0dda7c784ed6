"""One queue across the fleet: workload ids named with their node, moves, and their repair.

Every node numbers its own workloads (w-1, w-2, ...), so the fleet names one by
its node too: "gpu-node-03/w-12". A workload moves from node A to node B in
two steps, because no call spans two daemons: it is submitted on B with an
idempotency key and `moved_from` naming it on A, then cancelled on A. A retry
of the first step finds the copy it made (the key), and a move cut between the
two steps (a console that crashed or lost a node) is finished by whoever sees
both copies next: `interrupted_moves` says which copy to cancel so exactly one
remains. No Qt, no protobuf: records of console.fleet.control.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from console.fleet.control import WorkloadRow, WorkloadState

SEPARATOR = "/"
_KEY = re.compile(r"move:(?P<host>[^/@]+)/(?P<id>[^/@]+)@(?P<queued>\d+)")


def qualified_id(host: str, workload_id: str) -> str:
    """ "gpu-node-03/w-12": unique across the fleet."""
    return f"{host}{SEPARATOR}{workload_id}"


def split_qualified(text: str) -> tuple[str, str]:
    """("gpu-node-03", "w-12") from "gpu-node-03/w-12"; ValueError naming what is wrong."""
    host, sep, workload_id = text.rpartition(SEPARATOR)
    if not sep or not host or not workload_id:
        raise ValueError(f"{text!r} is not NODE/ID (e.g. gpu-node-03/w-12)")
    return host, workload_id


def move_key(host: str, workload: WorkloadRow) -> str:
    """The idempotency key of moving this workload away from `host`.

    With the time it was queued, so a node whose journal was reset (ids counted
    from w-1 again) never mistakes a new w-3 for one moved before.
    """
    return f"move:{host}{SEPARATOR}{workload.id}@{workload.queued_unix_ms}"


@dataclass(frozen=True)
class Repair:
    """A copy to cancel so that a moved workload exists once, and why."""

    cancel: WorkloadRow
    why: str


@dataclass(frozen=True)
class BothRunning:
    """A move cut short after both copies started: a person must choose."""

    source: WorkloadRow
    copy: WorkloadRow


def interrupted_moves(
    workloads: Iterable[WorkloadRow], host_of: Mapping[str, str]
) -> tuple[list[Repair], list[BothRunning]]:
    """The copies left by moves cut between their two steps, and what to cancel.

    `host_of` maps each node's target to its host name. A copy on B whose
    source on A is still queued finishes the move: the source is cancelled. A
    source that started meanwhile (auto placement on A) keeps running and the
    copy, still queued, is cancelled. Both running: reported, not touched.
    """
    rows = list(workloads)
    by_place = {(host_of.get(w.target, w.target), w.id): w for w in rows}
    repairs: list[Repair] = []
    conflicts: list[BothRunning] = []
    for copy in rows:
        key = _KEY.fullmatch(copy.idempotency_key)
        if key is None or copy.state.ended:
            continue
        source = by_place.get((key["host"], key["id"]))
        if source is None or source.target == copy.target or source.state.ended:
            continue
        if source.queued_unix_ms != int(key["queued"]):
            continue  # a later workload that reuses the id after a journal reset
        here = qualified_id(host_of.get(copy.target, copy.target), copy.id)
        there = qualified_id(key["host"], source.id)
        if source.state is WorkloadState.QUEUED:
            repairs.append(Repair(source, f"finishing its move to {here}"))
        elif copy.state is WorkloadState.QUEUED:
            repairs.append(Repair(copy, f"its move was cut short and {there} started meanwhile"))
        else:
            conflicts.append(BothRunning(source, copy))
    return repairs, conflicts
