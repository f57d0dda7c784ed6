"""Who the console is on each node (WhoAmI), and what that role lets it do.

The console greys out or hides what the caller's role does not allow, so a
person is told before asking; the daemon still decides every call.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Role(enum.IntEnum):
    """The daemon's roles (gpufleet.v1.Role): each allows what the ones below it do."""

    VIEWER = 1  # watch
    OPERATOR = 2  # acknowledge, submit, reserve, kill: for themselves and their teams
    ADMIN = 3  # everything, for anyone; read the audit log

    @property
    def label(self) -> str:
        return self.name.lower()


@dataclass(frozen=True)
class Identity:
    """The caller as a node sees it."""

    user: str
    role: Role
    teams: tuple[str, ...] = ()
    authenticated_by: str = "token"  # "token", "client-certificate" or "none"

    @property
    def holders(self) -> tuple[str, ...]:
        """The names this caller may act for: itself and team:NAME of its teams."""
        return (self.user, *(f"team:{t}" for t in self.teams))

    def may_act_for(self, owner: str | None) -> bool:
        return self.role >= Role.ADMIN or owner in self.holders

    def describe(self) -> str:
        """ "otto (operator; teams ml) by token"."""
        teams = f"; teams {', '.join(self.teams)}" if self.teams else ""
        how = {
            "none": "without authentication",
            "client-certificate": "by client certificate",
        }.get(self.authenticated_by, f"by {self.authenticated_by}")
        return f"{self.user} ({self.role.label}{teams}) {how}"


def role_refusal(identity: Identity | None, needed: Role, node_name: str) -> str | None:
    """Why this caller may not do what needs `needed` on the node; None when it may.

    An unknown identity (not connected yet, or a daemon without WhoAmI) refuses
    nothing here: the node decides.
    """
    if identity is None or identity.role >= needed:
        return None
    return (f"needs the {needed.label} role ({identity.user} is {identity.role.label} "
            f"on {node_name})")  # fmt: skip
