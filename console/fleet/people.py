"""Users and teams the console knows of: from its settings and from what the fleet shows.

A holder is a user name or a team as "team:NAME" (the daemon's convention).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from console.fleet.model import FleetModel, NodeRecord
from gpufleet.policy import is_team

# Where a name was seen, in the order shown in a tooltip.
SOURCES = ("settings", "reservations", "workloads", "processes")


@dataclass(frozen=True)
class Person:
    name: str  # as the daemon takes it: "alice" or "team:ml"
    sources: tuple[str, ...]

    @property
    def team(self) -> bool:
        return is_team(self.name)


def process_users(node: NodeRecord) -> frozenset[str]:
    """The users of the node's processes now."""
    return frozenset(p.user for snap in node.latest.values() for p in snap.processes if p.user)


def known_people(
    configured: Iterable[str],
    fleet: FleetModel,
    users_by_node: Mapping[str, frozenset[str]] | None = None,
) -> list[Person]:
    """Everyone from the settings and the fleet, teams first, then users, by name.

    `users_by_node`: each node's process_users, where the caller keeps them as nodes
    change (at 10,000 GPUs a look at every process at once took 26 ms of a frame).
    """
    seen: dict[str, set[str]] = {}

    def add(name: str | None, source: str) -> None:
        name = (name or "").strip()
        if name:
            seen.setdefault(name, set()).add(source)

    for name in configured:
        add(name, "settings")
    for reservation in fleet.control.reservations():
        add(reservation.holder, "reservations")
    for workload in fleet.control.workloads():
        add(workload.owner, "workloads")
    if users_by_node is None:
        users_by_node = {node.target: process_users(node) for node in fleet}
    for user in frozenset().union(*users_by_node.values()):
        add(user, "processes")
    people = [Person(n, tuple(s for s in SOURCES if s in where)) for n, where in seen.items()]
    return sorted(people, key=lambda p: (not p.team, p.name.lower()))
