"""Finding things in the fleet: a GPU, a node, a user, a Slurm job, a container, a GPU UUID.

Plain Python over the fleet model (no Qt): `find` turns what a person typed
into the places that match, best first, each saying why it matched. What it
understands:

- ``node:index`` (``gpu-node-03:1``, or the node's address with ``:index``): that GPU;
- an index alone (``3``): GPU 3 of every node;
- a node's host name or address, or the start of one: the node (its first GPU);
- a user: GPUs with a process of theirs, or reserved for them, or running their workload;
- a Slurm job id, a container id or a GPU UUID, or its start (``GPU-`` may be left out).

Matching ignores case and the spaces around the text.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from console.fleet.model import FleetModel, NodeRecord


@dataclass(frozen=True)
class Match:
    target: str
    gpu: int | None  # None: the node as a whole
    kind: str  # "GPU", "node", "user", "Slurm job", "container", "UUID"
    why: str  # "user alice on gpu-node-03:1"


def find(fleet: FleetModel, text: str, now_unix_ms: int) -> list[Match]:
    """Everything `text` matches, best first (exact before prefix), each place once."""
    query = text.strip()
    if not query:
        return []
    seen: set[tuple[str, int | None]] = set()
    found: list[Match] = []
    for match in _all(fleet, query, now_unix_ms):
        place = (match.target, match.gpu)
        if place not in seen:
            seen.add(place)
            found.append(match)
    return found


def _all(fleet: FleetModel, query: str, now_unix_ms: int) -> Iterator[Match]:
    lowered = query.lower()
    nodes = fleet.nodes()
    yield from _gpu_places(nodes, lowered)
    yield from _nodes(nodes, lowered)
    yield from _users(fleet, nodes, lowered, now_unix_ms)
    yield from _ids(nodes, lowered)


def place_name(node: NodeRecord, gpu: int) -> str:
    """How a person names a GPU: "gpu-node-03:1"."""
    return f"{node.name}:{gpu}"


def _gpu_places(nodes: list[NodeRecord], query: str) -> Iterator[Match]:
    """``node:index`` exactly, then a bare index on every node that has it."""
    name, _, index = query.rpartition(":")
    if name and index.isdigit():
        for node in nodes:
            if name in (node.name.lower(), node.target.lower()) and int(index) < node.gpu_count:
                yield Match(node.target, int(index), "GPU", place_name(node, int(index)))
    if query.isdigit():
        for node in nodes:
            if int(query) < node.gpu_count:
                yield Match(node.target, int(query), "GPU", place_name(node, int(query)))


def _nodes(nodes: list[NodeRecord], query: str) -> Iterator[Match]:
    """A node by its host name or address: exact first, then by its start, then anywhere."""
    for test in (str.__eq__, str.startswith, str.__contains__):
        for node in nodes:
            if any(test(word.lower(), query) for word in (node.name, node.target)):
                yield Match(node.target, None, "node", f"node {node.name}")


def _users(
    fleet: FleetModel, nodes: list[NodeRecord], query: str, now_unix_ms: int
) -> Iterator[Match]:
    """GPUs a user holds: their processes, their reservations, their running workloads."""
    for node in nodes:
        for index, snap in sorted(node.latest.items()):
            users = {p.user.lower() for p in snap.processes if p.user}
            reservation = fleet.control.reservation_on(node.target, index, now_unix_ms)
            workload = fleet.control.running_on(node.target, index)
            if reservation is not None:
                users.add(reservation.holder.lower())
            if workload is not None:
                users.add(workload.owner.lower())
            if query in users:
                yield Match(
                    node.target, index, "user", f"user {query} on {place_name(node, index)}"
                )


def _ids(nodes: list[NodeRecord], query: str) -> Iterator[Match]:
    """Slurm job, container and UUID, by the whole id first, then by its start."""
    exact: list[Match] = []
    prefix: list[Match] = []
    for node in nodes:
        uuids = {g.index: g.uuid for g in node.info.gpus} if node.info else {}
        for index in range(node.gpu_count):
            snap = node.latest.get(index)
            processes = snap.processes if snap is not None else ()
            ids = [("Slurm job", p.slurm_job_id) for p in processes if p.slurm_job_id]
            ids += [("container", p.container_id) for p in processes if p.container_id]
            if index in uuids:
                ids.append(("UUID", uuids[index]))
            for kind, found in ids:
                words = _id_forms(kind, found.lower())
                if query in words or any(w.startswith(query) for w in words):
                    match = Match(
                        node.target, index, kind, f"{kind} {found} on {place_name(node, index)}"
                    )
                    (exact if query in words else prefix).append(match)
    yield from exact
    yield from prefix


def _id_forms(kind: str, found: str) -> tuple[str, ...]:
    """An id as a person may type it: a UUID with or without its "GPU-"."""
    if kind == "UUID":
        return found, found.removeprefix("gpu-").removeprefix("mig-")
    return (found,)
