"""Users, roles and the caller of the RPC being served."""

from __future__ import annotations

import contextvars
from dataclasses import dataclass

from gpufleet import policy
from gpufleet.policy import LOCAL_USER, Role


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


# Without authentication (a loopback demo) every caller is this one local admin.
LOCAL_ADMIN = Caller(LOCAL_USER, Role.ADMIN, (), "none")
_current: contextvars.ContextVar[Caller] = contextvars.ContextVar("gpufleet_caller")


def current_caller() -> Caller:
    """The caller of the RPC this thread is serving (set by the auth interceptor)."""
    return _current.get(LOCAL_ADMIN)


def set_current_caller(caller: Caller) -> contextvars.Token[Caller]:
    return _current.set(caller)


def reset_current_caller(token: contextvars.Token[Caller]) -> None:
    _current.reset(token)


def acting_user() -> str:
    """The name every record of this call gives its actor: the caller the interceptor
    identified (a token's or certificate's user; LOCAL_USER without authentication).

    The same name WhoAmI answers and the audit log records. A request's own `actor`
    field is never read: a caller does not choose the name it acts under.
    """
    return current_caller().user
