"""AuthState: one immutable view of [auth], and who a bearer token is under it.

The interceptor holds one AuthState and replaces it whole on a reload, so each
call is judged by one consistent set of users, keys and revocations.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

import grpc

from node_daemon.auth.identity import Caller, User
from node_daemon.auth.jwt import InvalidToken, JwtPolicy, VerifiedToken, verify
from node_daemon.auth.seen_teams import SeenTeams
from node_daemon.auth.settings import AuthSettings
from node_daemon.auth.token_cache import TokenCache
from node_daemon.auth.tokens import token_hash

STATIC_PREFIX = "gft_"


class Denied(Exception):
    """A refused call: its status code, its message, and the kind of refusal.

    Args:
        code: the gRPC status the caller gets.
        message: what is wrong, for the caller (it may quote what they sent).
        reason: the kind of refusal in fixed words ("invalid JWT"), never the
            caller's text: denials are counted by it (node_daemon/auth/denials.py).
    """

    def __init__(self, code: grpc.StatusCode, message: str, reason: str) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason

    @property
    def kind(self) -> str:
        """`UNAUTHENTICATED: invalid JWT`: what the audit log groups denials by."""
        return f"{self.code.name}: {self.reason}"


def _unauthenticated(message: str, reason: str) -> Denied:
    return Denied(grpc.StatusCode.UNAUTHENTICATED, message, reason)


class AuthState:
    def __init__(
        self,
        settings: AuthSettings,
        clock: Callable[[], float] = time.time,
        seen: SeenTeams | None = None,
    ) -> None:
        self.settings = settings
        self._seen = seen or SeenTeams()
        self.enabled = settings.enabled
        self.by_hash: Mapping[str, User] = {
            u.token_sha256: u for u in settings.users if u.token_sha256
        }
        self.by_name: Mapping[str, User] = {u.name: u for u in settings.users}
        self._policy = (
            None if settings.jwks is None
            else JwtPolicy(settings.jwks, settings.issuer, settings.audience, settings.leeway_s,
                           settings.user_claim)
        )  # fmt: skip
        self._cache = TokenCache()
        self._clock = clock

    def check_revoked(self, user: str) -> None:
        if user in self.settings.revoked_users:
            raise _unauthenticated(f"the credentials of {user} are revoked on this node", "revoked")

    def caller_for_token(self, token: str, peer: str) -> Caller:
        """Static gft_ tokens by hash; anything else as a JWT where a JWKS is configured."""
        if token.startswith(STATIC_PREFIX) or self._policy is None:
            return self._static(token, peer)
        verified = self._jwt(token)
        if verified.token_id and verified.token_id in self.settings.revoked_jti:
            raise _unauthenticated(f"JWT {verified.token_id[:64]!r} is revoked on this node",
                                   "revoked")  # fmt: skip
        self.check_revoked(verified.user)
        return Caller(verified.user, verified.role, verified.teams, "jwt", peer,
                      verified.expires_unix_s, verified.issuer, verified.token_id)  # fmt: skip

    def _jwt(self, token: str) -> VerifiedToken:
        assert self._policy is not None
        now = self._clock()
        verified = self._cache.get(token, now)
        if verified is None:
            try:
                verified = verify(token, self._policy, lambda: now)
            except InvalidToken as exc:
                raise _unauthenticated(str(exc), "invalid JWT") from None
            self._cache.put(token, verified)
            self._seen.saw(verified.user, verified.teams)
        return verified

    def _static(self, token: str, peer: str) -> Caller:
        user = self.by_hash.get(token_hash(token))
        if user is None:
            jwt_note = (
                "; this node takes no JWTs (no [auth] jwks_file)" if token.count(".") == 2 else ""
            )
            raise _unauthenticated(
                f"unknown token (revoked, or for another node?){jwt_note}", "unknown token"
            )
        self.check_revoked(user.name)
        expires = user.token_expires_unix_s
        if expires is not None and self._clock() > expires:
            day = time.strftime("%Y-%m-%d", time.gmtime(expires))
            raise _unauthenticated(f"the token of {user.name} expired on {day}", "expired token")
        return Caller(user.name, user.role, user.teams, "token", peer, expires)
