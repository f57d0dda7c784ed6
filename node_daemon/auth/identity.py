"""Users, roles and the caller of the RPC being served."""

from __future__ import annotations

import contextvars
from dataclasses import dataclass

from gpufleet import policy
from gpufleet.policy import Role


@dataclass(frozen=True)
class User:
    name: str
    role: Role
    teams: tuple[str, ...] = ()
    token_sha256: str | None = None
    # Unix seconds after which the token no longer works; None: no expiry.
    token_expires_unix_s: float | None = None


@dataclass(frozen=True)
class Caller:
    user: str
    role: Role
    teams: tuple[str, ...]
    authenticated_by: str  # "token", "jwt", "client-certificate", "none"
    peer: str = ""
    # Unix seconds after which the credential stops working (a JWT's exp, a static
    # token's token_expires); None: it does not expire.
    expires_unix_s: float | None = None
    token_issuer: str = ""  # a JWT's iss and jti; empty for other credentials
    token_id: str = ""

    @property
    def holders(self) -> tuple[str, ...]:
        """The names this caller may act for: itself and team:NAME of its teams."""
        return policy.holders(self.user, self.teams)

    def may_act_for(self, owner: str) -> bool:
        return policy.may_act_for(self.role, self.user, self.teams, owner)


# Without authentication (a loopback demo) every caller is a local admin.
LOCAL_ADMIN = Caller("local", Role.ADMIN, (), "none")
_current: contextvars.ContextVar[Caller] = contextvars.ContextVar("gpufleet_caller")


def current_caller() -> Caller:
    """The caller of the RPC this thread is serving (set by the auth interceptor)."""
    return _current.get(LOCAL_ADMIN)


def set_current_caller(caller: Caller) -> contextvars.Token[Caller]:
    return _current.set(caller)


def reset_current_caller(token: contextvars.Token[Caller]) -> None:
    _current.reset(token)


def acting_user(requested: str) -> str:
    """The name to record as the actor: the authenticated user, else what the caller said."""
    caller = current_caller()
    if caller.authenticated_by != "none":
        return caller.user
    return requested.strip()[:128] or "anonymous"
