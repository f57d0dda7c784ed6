"""[auth] and [tls] of the daemon's config: users with roles and token hashes; certificates.

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

from node_daemon.auth.identity import Role, User
from node_daemon.errors import ConfigError


@dataclass(frozen=True)
class TlsSettings:
    cert: Path
    key: Path
    client_ca: Path | None = None
    require_client_cert: bool = False


@dataclass(frozen=True)
class AuthSettings:
    users: tuple[User, ...] = ()
    tls: TlsSettings | None = None

    @property
    def enabled(self) -> bool:
        return bool(self.users)


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
    return User(raw["name"], role, tuple(teams), digest, _expiry(raw.get("token_expires"), where))


def _tls(raw: Any, source: str) -> TlsSettings | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or not raw.get("cert") or not raw.get("key"):
        raise ConfigError(f"{source}: [tls] needs cert and key (PEM files)")
    client_ca = raw.get("client_ca")
    return TlsSettings(Path(raw["cert"]), Path(raw["key"]), Path(client_ca) if client_ca else None,
                       bool(raw.get("require_client_cert", False)))  # fmt: skip


def parse_auth(data: dict[str, Any], source: str) -> AuthSettings:
    auth = data.get("auth", {})
    if not isinstance(auth, dict):
        raise ConfigError(f"{source}: [auth] must be a table")
    raw_users = auth.get("users", [])
    users = tuple(_user(u, f"{source}: auth.users[{i}]") for i, u in enumerate(raw_users))
    names = [u.name for u in users]
    if len(set(names)) != len(names):
        raise ConfigError(f"{source}: a user name appears twice in [[auth.users]]")
    return AuthSettings(users, _tls(data.get("tls"), source))
