"""[auth] and [tls] of the daemon's config: users, signed tokens (JWKS), revocation, TLS.

[auth]
jwks_file = "/etc/gpufleet/jwks.json"   # optional: accept JWTs signed by these keys
issuer = "https://idp.example.org/realms/gpufleet"   # optional: iss must be this
audience = "gpufleet"             # optional: aud must include this (or one of a list)
leeway_s = 30                     # clock skew allowed on exp and nbf
user_claim = "sub"                # the claim that names the user
revoked_jti = ["5f0c…"]           # JWT ids refused from now on
revoked_users = ["mallory"]       # users refused, whatever their credential

[[auth.users]]
name = "alice"
role = "operator"                 # viewer | operator | admin
teams = ["ml"]
token_sha256 = "9f86d0…"          # gpufleet token new --user alice
token_expires = 2027-06-30        # optional (TOML date)

[tls]
cert = "/etc/gpufleet/tls/server.crt"
key = "/etc/gpufleet/tls/server.key"
client_ca = "/etc/gpufleet/tls/clients-ca.crt"   # optional: accept client certificates
require_client_cert = false                       # true: mutual TLS only
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpufleet.policy import Role, team_name
from node_daemon.auth.identity import User
from node_daemon.auth.jwks import Jwks, load_jwks
from node_daemon.errors import ConfigError

AUTH_KEYS = frozenset({"users", "jwks_file", "issuer", "audience", "leeway_s", "user_claim",
                       "revoked_jti", "revoked_users"})  # fmt: skip
MAX_LEEWAY_S = 300


@dataclass(frozen=True)
class TlsSettings:
    cert: Path
    key: Path
    client_ca: Path | None = None
    require_client_cert: bool = False


@dataclass(frozen=True)
class AuthSettings:
    """Who may call: a frozen value, swapped whole by a reload (AuthInterceptor.reconfigure).

    `jwks` is the parsed `jwks_file`, read when the config was parsed: a bad key set
    rejects the config that names it.
    """

    users: tuple[User, ...] = ()
    tls: TlsSettings | None = None
    jwks_file: Path | None = None
    jwks: Jwks | None = None
    issuer: str | None = None
    audience: tuple[str, ...] = ()
    leeway_s: float = 30.0
    revoked_jti: frozenset[str] = frozenset()
    revoked_users: frozenset[str] = frozenset()
    user_claim: str = "sub"

    @property
    def enabled(self) -> bool:
        return bool(self.users) or self.jwks is not None


def _expiry(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return value.timestamp()
    if isinstance(value, dt.date):
        return dt.datetime.combine(value, dt.time.max, tzinfo=dt.UTC).timestamp()
    raise ConfigError(f"{where}: token_expires must be a TOML date like 2027-06-30")


def _user(raw: Any, where: str) -> User:
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str) or not raw["name"]:
        raise ConfigError(f"{where}: each [[auth.users]] needs a name")
    unknown = sorted(set(raw) - {"name", "role", "teams", "token_sha256", "token_expires"})
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}")
    try:
        role = Role.parse(str(raw.get("role", "viewer")))
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    digest = raw.get("token_sha256")
    if digest is not None and (not isinstance(digest, str) or len(digest) != 64):
        raise ConfigError(f"{where}: token_sha256 must be 64 hex digits (gpufleet token new)")
    teams = raw.get("teams", [])
    if not isinstance(teams, list) or not all(isinstance(t, str) for t in teams):
        raise ConfigError(f"{where}: teams must be a list of names")
    teams = tuple(dict.fromkeys(team_name(t) for t in teams))  # "team:ml" is team ml
    return User(raw["name"], role, teams, digest, _expiry(raw.get("token_expires"), where))


def _tls(raw: Any, source: str) -> TlsSettings | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or not raw.get("cert") or not raw.get("key"):
        raise ConfigError(f"{source}: [tls] needs cert and key (PEM files)")
    client_ca = raw.get("client_ca")
    return TlsSettings(Path(raw["cert"]), Path(raw["key"]), Path(client_ca) if client_ca else None,
                       bool(raw.get("require_client_cert", False)))  # fmt: skip


def _names(auth: dict[str, Any], key: str, source: str) -> tuple[str, ...]:
    value = auth.get(key, [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"{source}: [auth] {key} must be a list of non-empty strings")
    return tuple(value)


def _optional_text(auth: dict[str, Any], key: str, source: str) -> str | None:
    value = auth.get(key)
    if value is not None and (not isinstance(value, str) or not value):
        raise ConfigError(f"{source}: [auth] {key} must be a non-empty string")
    return value


def _leeway(auth: dict[str, Any], source: str) -> float:
    value = auth.get("leeway_s", 30)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{source}: [auth] leeway_s must be a number of seconds")
    if not 0 <= value <= MAX_LEEWAY_S:
        raise ConfigError(f"{source}: [auth] leeway_s must be 0 .. {MAX_LEEWAY_S}, got {value}")
    return float(value)


def _jwks(auth: dict[str, Any], source: str) -> tuple[Path | None, Jwks | None]:
    name = _optional_text(auth, "jwks_file", source)
    if name is None:
        return None, None
    return Path(name), load_jwks(Path(name), f"{source}: [auth]")


def parse_auth(data: dict[str, Any], source: str) -> AuthSettings:
    auth = data.get("auth", {})
    if not isinstance(auth, dict):
        raise ConfigError(f"{source}: [auth] must be a table")
    unknown = sorted(set(auth) - AUTH_KEYS)
    if unknown:
        raise ConfigError(f"{source}: unknown key(s) {', '.join(unknown)} in [auth]")
    raw_users = auth.get("users", [])
    if not isinstance(raw_users, list):
        raise ConfigError(f"{source}: users in [auth] must be [[auth.users]] tables")
    users = tuple(_user(u, f"{source}: auth.users[{i}]") for i, u in enumerate(raw_users))
    names = [u.name for u in users]
    if len(set(names)) != len(names):
        raise ConfigError(f"{source}: a user name appears twice in [[auth.users]]")
    jwks_file, jwks = _jwks(auth, source)
    return AuthSettings(
        users, _tls(data.get("tls"), source), jwks_file, jwks,
        _optional_text(auth, "issuer", source), _names(auth, "audience", source),
        _leeway(auth, source), frozenset(_names(auth, "revoked_jti", source)),
        frozenset(_names(auth, "revoked_users", source)),
        _optional_text(auth, "user_claim", source) or "sub",
    )  # fmt: skip
