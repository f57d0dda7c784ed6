"""The security posture of a config: what a reload may not lower unless the file says so.

One place defines "lower": authentication turned off (from tokens or a JWKS to
no credentials at all, where every caller is the local admin), a JWT issuer or
audience check dropped, TLS turned off, client certificates no longer
required, the listen address widened (loopback, then one address, then every
address), `/metrics` (which has no authentication and names who runs what)
turned on or widened the same way, `insecure` turned on. A reload (SIGHUP)
whose file does any of these is refused whole, with these phrases as the
reason, unless the file itself has `[reload] allow_weaker_security = true`
(node_daemon.commands.config_reload).

Why: the file a reload reads is not always the file meant. `> daemon.toml`, or
an editor or deploy tool that writes in place, leaves it empty or cut short
for a moment, and an empty file is a valid config with no users: before this
check a SIGHUP then turned authentication off and made every anonymous caller
the node's admin.
"""

from __future__ import annotations

import ipaddress

from node_daemon.config import DaemonConfig
from node_daemon.listen import parse_listen_address

ALLOW_KEY = "[reload] allow_weaker_security = true"
# How far a listen address reaches: loopback, one address (or a host name), all of them.
_LOOPBACK, _ONE, _ALL = 0, 1, 2
_OFF = -1  # metrics_listen unset: no /metrics at all
_REACH_WORDS = {_OFF: "off", _LOOPBACK: "loopback", _ONE: "one address", _ALL: "every address"}


def weakenings(old: DaemonConfig, new: DaemonConfig) -> tuple[str, ...]:
    """What `new` lowers against `old` (the config in force), one phrase each; () if nothing.

    Compares what the file asks for, restart-only settings (listen, insecure, turning TLS
    off) included: what a reload keeps for the next start is lowered then.

    Raises:
        ListenAddressError: `new.listen` is not HOST:PORT.
    """
    found = _auth_weakenings(old, new) + _tls_weakenings(old, new)
    before, after = _reach(old.listen), _reach(new.listen)
    if after > before:
        found.append(
            f"listen widened from {old.listen} ({_REACH_WORDS[before]}) to {new.listen} "
            f"({_REACH_WORDS[after]})"
        )
    before, after = _metrics_reach(old.metrics_listen), _metrics_reach(new.metrics_listen)
    if after > before:
        found.append(
            f"metrics_listen widened from {old.metrics_listen or 'off'} "
            f"({_REACH_WORDS[before]}) to {new.metrics_listen} ({_REACH_WORDS[after]}): "
            "/metrics has no authentication"
        )
    if new.insecure and not old.insecure:
        found.append("insecure turned on")
    return tuple(found)


def _auth_weakenings(old: DaemonConfig, new: DaemonConfig) -> list[str]:
    before, after = old.auth, new.auth
    if before.enabled and not after.enabled:
        return [
            "authentication turned off (no [[auth.users]] and no [auth] jwks_file: every "
            "caller, with or without a token, would be the local admin)"
        ]
    found = []
    if before.jwks is not None and after.jwks is not None:
        if before.issuer is not None and after.issuer is None:
            found.append("the JWT issuer check dropped ([auth] issuer removed)")
        if before.audience and not after.audience:
            found.append("the JWT audience check dropped ([auth] audience removed)")
    return found


def _tls_weakenings(old: DaemonConfig, new: DaemonConfig) -> list[str]:
    before, after = old.auth.tls, new.auth.tls
    if before is None:
        return []
    if after is None:
        return ["TLS turned off ([tls] removed: tokens and data would cross the network in clear)"]
    if before.require_client_cert and not after.require_client_cert:
        return ["client certificates no longer required ([tls] require_client_cert)"]
    return []


def _metrics_reach(listen: str | None) -> int:
    return _OFF if not listen else _reach(listen)


def _reach(listen: str) -> int:
    """How far a listen address reaches. ListenAddressError for a bad one: a reload
    names it then, rather than keeping it for a start that would fail on it."""
    address = parse_listen_address(listen)
    if address.is_loopback:
        return _LOOPBACK
    try:
        return _ALL if ipaddress.ip_address(address.host).is_unspecified else _ONE
    except ValueError:
        return _ONE  # a host name: one interface's address, whatever it resolves to
