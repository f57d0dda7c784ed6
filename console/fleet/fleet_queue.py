"""One queue across the fleet: workload ids named with their node, moves, and their repair.

Every node numbers its own workloads (w-1, w-2, ...), so the fleet names one by
its node too: "gpu-node-03/w-12". A workload moves from node A to node B in
two steps, because no call spans two daemons: it is submitted on B with an
idempotency key and `moved_from` naming it on A, then cancelled on A. A retry
of the first step finds the copy it made (the key), and a move cut between the
two steps (a console that crashed or lost a node) is finished by whoever sees
both copies next: `interrupted_moves` says which copy to cancel so exactly one
remains, once the copy proves to be the move (console/fleet/move_proof.py: the
key alone is visible to anyone, and proves nothing). No Qt, no protobuf:
records of console.fleet.control.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass

from console.fleet.control import WorkloadRow
from console.fleet.move_proof import move_refusal, submitter_words
from gpufleet.states import WorkloadState

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


@dataclass(frozen=True)
class Unproven:
    """A workload that carries a move's key but does not prove to be that move: left alone."""

    source: WorkloadRow
    copy: WorkloadRow
    why: str


def interrupted_moves(
    workloads: Iterable[WorkloadRow],
    host_of: Mapping[str, str],
    open_nodes: Collection[str] = frozenset(),
) -> tuple[list[Repair], list[BothRunning]]:
    """The copies left by moves cut between their two steps, and what to cancel.

    `host_of` maps each node's target to its host name; `open_nodes` are the
    targets that take calls without authentication. A copy on B whose source
    on A is still queued finishes the move: the source is cancelled. A source
    that started meanwhile (auto placement on A) keeps running and the copy,
    still queued, is cancelled. Both running: reported, not touched. A pair
    whose copy does not prove the move (`unproven_moves`) is none of these.
    """
    repairs: list[Repair] = []
    conflicts: list[BothRunning] = []
    for source, copy in _key_pairs(workloads, host_of):
        if move_refusal(source, copy, source.target in open_nodes) is not None:
            continue
        here = qualified_id(host_of.get(copy.target, copy.target), copy.id)
        there = qualified_id(host_of.get(source.target, source.target), source.id)
        made = submitter_words(copy)
        if source.state is WorkloadState.QUEUED:
            repairs.append(Repair(source, f"finishing its move to {here}, {made}"))
        elif copy.state is WorkloadState.QUEUED:
            why = f"its move was cut short and {there} started meanwhile ({here} {made})"
            repairs.append(Repair(copy, why))
        else:
            conflicts.append(BothRunning(source, copy))
    return repairs, conflicts


def unproven_moves(
    workloads: Iterable[WorkloadRow],
    host_of: Mapping[str, str],
    open_nodes: Collection[str] = frozenset(),
) -> list[Unproven]:
    """Workloads that carry the move key of a live workload elsewhere without proving the move."""
    found = []
    for source, copy in _key_pairs(workloads, host_of):
        why = move_refusal(source, copy, source.target in open_nodes)
        if why is not None:
            found.append(Unproven(source, copy, why))
    return found


def _key_pairs(
    workloads: Iterable[WorkloadRow], host_of: Mapping[str, str]
) -> Iterator[tuple[WorkloadRow, WorkloadRow]]:
    """(source, copy): a live workload, and a live one on another node with its move key."""
    rows = list(workloads)
    by_place = {(host_of.get(w.target, w.target), w.id): w for w in rows}
    for copy in rows:
        key = _KEY.fullmatch(copy.idempotency_key)
        if key is None or copy.state.ended:
            continue
        source = by_place.get((key["host"], key["id"]))
        if source is None or source.target == copy.target or source.state.ended:
            continue
        if source.queued_unix_ms != int(key["queued"]):
            continue  # a later workload that reuses the id after a journal reset
        yield source, copy
