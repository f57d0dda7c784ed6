"""What a reload changes: the config in force against the one just read, in words.

SIGHUP (and `systemctl reload`) re-reads the config file with the flags of the
start (node_daemon.commands.main); `plan_reload` sorts the difference into what
is applied live and what needs a restart, and words both for the log. Applying
is NodeDaemon.reconfigure's; nothing here touches the running daemon.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from node_daemon.alerts.am_settings import AlertmanagerSettings
from node_daemon.auth.identity import User
from node_daemon.auth.jwks import Jwks
from node_daemon.auth.settings import AuthSettings
from node_daemon.config import DaemonConfig, alertmanager_settings

# [daemon] keys the running process cannot take over: sockets bound, threads sized,
# files opened, the backend chosen at start. A change is kept for the next start.
RESTART_ONLY = (
    "listen", "backend", "gpus", "seed", "model", "scenario", "sim_speed", "sample_interval_s",
    "fast_sample_interval_s", "fast_sample_margin_c", "fast_sample_lookahead_s",
    "demo", "process_interval_s", "history_seconds", "max_streams", "max_streams_per_client",
    "insecure", "ready_file", "hostname", "state_dir", "metrics_listen",
    "metrics_hostname_label", "usage_flush_interval_s",
)  # fmt: skip
# Alertmanager settings by what the log calls them; auth's secrets are compared, never shown.
_AM_PARTS = {
    "urls": ("urls",),
    "labels": ("labels",),
    "resend": ("resend_interval_s",),
    "timeout": ("timeout_s",),
    "tls": ("ca_file", "cert_file", "key_file"),
    "auth": ("auth",),
    "watchdog": ("watchdog",),
    "critical_hold": ("critical_hold_s",),
}


@dataclass(frozen=True)
class ReloadPlan:
    """`config`: what to apply (the new config with the restart-only settings in force kept);
    `changes`: what changes live, one phrase each; `needs_restart`: the settings kept."""

    config: DaemonConfig
    changes: tuple[str, ...]
    needs_restart: tuple[str, ...]

    def summary(self) -> str:
        return "reload: " + ("; ".join(self.changes) if self.changes else "no changes")


def plan_reload(old: DaemonConfig, new: DaemonConfig, tls_live: bool = True) -> ReloadPlan:
    """Sort `new` against `old` (the config in force). `tls_live`: whether the server's
    certificate can be swapped (only while TLS was on at start and stays on)."""
    restart = [key for key in RESTART_ONLY if getattr(old, key) != getattr(new, key)]
    kept = {key: getattr(old, key) for key in restart}
    workloads = new.workloads
    if old.workloads.launcher != workloads.launcher:
        restart.append("workloads.launcher")
        workloads = replace(workloads, launcher=old.workloads.launcher)
    # The history's file is opened, and its tiers and bound set, at start.
    history = new.history
    if old.history != new.history:
        restart.append("history")
        history = old.history
    # The sacct poller's thread is started with its interval; the prices apply live.
    usage = new.usage
    if old.usage.sacct_poll_interval_s != usage.sacct_poll_interval_s:
        restart.append("usage.sacct_poll_interval_s")
        usage = replace(usage, sacct_poll_interval_s=old.usage.sacct_poll_interval_s)
    auth = new.auth
    tls_changed = old.auth.tls != new.auth.tls
    if tls_changed and not (tls_live and _tls_swappable(old, new)):
        restart.append("tls")
        auth = replace(auth, tls=old.auth.tls)
    applied = replace(new, **kept, workloads=workloads, auth=auth, history=history, usage=usage)
    changes = [
        *_auth_changes(old.auth, applied.auth),
        *_named_changes("teams", old.teams, applied.teams),
        *_rule_changes(old, applied),
        *_alertmanager_changes(alertmanager_settings(old), alertmanager_settings(applied)),
        *_kill_policy_change(old, applied),
        *_workload_changes(old, applied),
        *_healing_changes(old, applied),
        *_health_changes(old, applied),
        *(["usage prices changed"] if old.usage.prices != applied.usage.prices else []),
    ]
    return ReloadPlan(applied, tuple(changes), tuple(restart))


def _tls_swappable(old: DaemonConfig, new: DaemonConfig) -> bool:
    """gRPC's server credentials are fixed at bind; only their certificates can be fetched
    anew, so TLS cannot be turned on or off live, nor client certificates made required."""
    before, after = old.auth.tls, new.auth.tls
    if before is None or after is None:
        return False
    return before.require_client_cert == after.require_client_cert


def _auth_changes(old: AuthSettings, new: AuthSettings) -> list[str]:
    changes = _user_changes(old.users, new.users)
    if old.tls != new.tls:
        changes.append("tls certificate files changed")
    # The JWT settings (jwks, issuer, audience, revocations): whatever fields AuthSettings
    # has besides users and tls, each named when it changes.
    changes += _key_changes(old.jwks, new.jwks)
    for f in fields(old):
        if f.name in ("users", "tls", "jwks"):
            continue
        before, after = getattr(old, f.name), getattr(new, f.name)
        if before != after:
            changes.append(_field_change(f"auth {f.name}", before, after))
    return changes


def _key_changes(old: Jwks | None, new: Jwks | None) -> list[str]:
    """JWKS keys by kid (public key ids, no secret): added, removed, or replaced in place."""
    before = {k.kid: k for k in old.keys} if old else {}
    after = {k.kid: k for k in new.keys} if new else {}
    added = sorted(set(after) - set(before))
    removed = sorted(set(before) - set(after))
    replaced = sorted(
        k for k in set(before) & set(after) if before[k].thumbprint != after[k].thumbprint
    )
    parts = [
        f"{_count(kids, 'jwks key')} {what} ({', '.join(kids)})"
        for kids, what in ((added, "added"), (removed, "removed"), (replaced, "replaced"))
        if kids
    ]
    return parts


def _user_changes(old: Iterable[User], new: Iterable[User]) -> list[str]:
    before, after = {u.name: u for u in old}, {u.name: u for u in new}
    added = sorted(set(after) - set(before))
    removed = sorted(set(before) - set(after))
    changed = sorted(n for n in set(before) & set(after) if before[n] != after[n])
    parts = []
    if added:
        parts.append(f"{_count(added, 'user')} added ({', '.join(added)})")
    if removed:
        parts.append(f"{_count(removed, 'user')} removed ({', '.join(removed)})")
    if changed:
        what = ", ".join(f"{n}: {'/'.join(_user_diff(before[n], after[n]))}" for n in changed)
        parts.append(f"{_count(changed, 'user')} changed ({what})")
    return parts


def _user_diff(old: User, new: User) -> list[str]:
    # The token's hash is not a secret, but the log says only that it changed.
    names = {"token_sha256": "token", "token_expires_unix_s": "token expiry"}
    return [
        names.get(f.name, f.name)
        for f in fields(old)
        if getattr(old, f.name) != getattr(new, f.name)
    ]


def _field_change(name: str, before: Any, after: Any) -> str:
    if isinstance(before, tuple | frozenset) and isinstance(after, tuple | frozenset):
        added, removed = len(set(after) - set(before)), len(set(before) - set(after))
        return f"{name}: {added} added, {removed} removed"
    return f"{name} changed"


def _named_changes(what: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    names = sorted(n for n in set(old) | set(new) if old.get(n) != new.get(n))
    return [f"{what} changed: {', '.join(names)}"] if names else []


def _rule_changes(old: DaemonConfig, new: DaemonConfig) -> list[str]:
    rules = [f.name for f in fields(old.alerts)]
    changed = [r for r in rules if getattr(old.alerts, r) != getattr(new.alerts, r)]
    return [f"alert rules changed: {', '.join(changed)}"] if changed else []


def _alertmanager_changes(old: AlertmanagerSettings, new: AlertmanagerSettings) -> list[str]:
    parts = [
        part
        for part, keys in _AM_PARTS.items()
        if any(getattr(old, k) != getattr(new, k) for k in keys)
    ]
    if not parts:
        return []
    if not old.urls or not new.urls:
        return ["alertmanager push " + ("started" if new.urls else "stopped (no urls)")]
    return [f"alertmanager {', '.join(parts)} changed"]


def _kill_policy_change(old: DaemonConfig, new: DaemonConfig) -> list[str]:
    before, after = old.allow_kill_job_processes, new.allow_kill_job_processes
    if before == after:
        return []
    return [f"allow_kill_job_processes {str(before).lower()} -> {str(after).lower()}"]


def _workload_changes(old: DaemonConfig, new: DaemonConfig) -> list[str]:
    changes = _named_changes("workload accounts", old.workloads.accounts, new.workloads.accounts)
    if old.workloads.work_dir != new.workloads.work_dir:
        changes.append("workloads work_dir changed")
    return changes


def _health_changes(old: DaemonConfig, new: DaemonConfig) -> list[str]:
    keys = [f.name for f in fields(old.health) if getattr(old.health, f.name) !=
            getattr(new.health, f.name)]  # fmt: skip
    return [f"health settings changed: {', '.join(keys)}"] if keys else []


def _healing_changes(old: DaemonConfig, new: DaemonConfig) -> list[str]:
    """[healing]: its mode by name, its actions' tables by key (in force at the next tick)."""
    before, after = old.healing, new.healing
    changes = [f"healing mode {before.mode} -> {after.mode}"] if before.mode != after.mode else []
    keys = [f.name for f in fields(before)
            if f.name != "mode" and getattr(before, f.name) != getattr(after, f.name)]  # fmt: skip
    return changes + ([f"healing changed: {', '.join(keys)}"] if keys else [])


def _count(names: list[str], noun: str) -> str:
    return f"{len(names)} {noun}{'' if len(names) == 1 else 's'}"
