"""Users of a daemon's `[auth]` for a test, each with a bearer token of its own."""

from __future__ import annotations

from collections.abc import Mapping

from gpufleet.policy import Role
from node_daemon.auth.identity import User
from node_daemon.auth.tokens import new_token, token_hash


class TokenUsers:
    """`users` for AuthSettings (their roles, and teams where given); `bearer(name)`, the
    metadata of a call made as that user."""

    def __init__(
        self, roles: Mapping[str, Role], teams: Mapping[str, tuple[str, ...]] | None = None
    ) -> None:
        self.tokens = {name: new_token() for name in roles}
        self.users = tuple(
            User(name, role, (teams or {}).get(name, ()), token_hash(self.tokens[name]))
            for name, role in roles.items()
        )

    def bearer(self, name: str) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self.tokens[name]}"),)
