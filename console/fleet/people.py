"""Users and teams the console knows of: from its settings and from what the fleet shows.

A holder is a user name or a team as "team:NAME" (the daemon's convention).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from console.fleet.model import FleetModel
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


def known_people(configured: Iterable[str], fleet: FleetModel) -> list[Person]:
    """Everyone from the settings and the fleet, teams first, then users, by name."""
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
    for node in fleet:
        for snap in node.latest.values():
            for process in snap.processes:
                add(process.user, "processes")
    people = [Person(n, tuple(s for s in SOURCES if s in where)) for n, where in seen.items()]
    return sorted(people, key=lambda p: (not p.team, p.name.lower()))
