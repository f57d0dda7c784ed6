"""The ``[workloads]`` table of daemon.toml: whose account a workload runs as, and where."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from node_daemon.errors import ConfigError

DEFAULT_WORK_DIR = "{home}/gpufleet-workloads/{id}"
_PLACEHOLDERS = ("{home}", "{user}", "{id}")
LAUNCHERS = ("auto", "systemd", "direct")


@dataclass(frozen=True)
class WorkloadSettings:
    """How workloads are started. Unset keys keep these defaults."""

    # Owner (user or team:NAME) -> local account; unmapped users run as the same name.
    accounts: dict[str, str] = field(default_factory=dict)
    # Each workload's own working directory, created by the workload's account.
    work_dir: str = DEFAULT_WORK_DIR
    # How workloads start (node_daemon.control.launcher_choice): a transient systemd
    # unit each ("systemd"), the daemon's own child ("direct"), or whichever works here.
    launcher: str = "auto"
    # Walltime: a workload submitted without a time limit gets this one (0: none);
    # none may ask for more than max_time_limit_s (0: no cap). At the limit it gets
    # TERM, then KILL after time_limit_grace_s, and ends "timed out".
    default_time_limit_s: int = 0
    max_time_limit_s: int = 0
    time_limit_grace_s: int = 30


def parse_workload_settings(table: Any, source: str) -> WorkloadSettings:
    """The [workloads] table, or ConfigError naming what is wrong."""
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: [workloads] must be a table")
    unknown = sorted(set(table) - {"accounts", "work_dir", "launcher", *_LIMIT_KEYS})
    if unknown:
        raise ConfigError(f"{source}: unknown key(s) {', '.join(unknown)} in [workloads]")
    accounts = table.get("accounts", {})
    if not isinstance(accounts, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and v for k, v in accounts.items()
    ):
        raise ConfigError(
            f"{source}: [workloads] accounts must map owners to account names, "
            'e.g. alice = "asmith"'
        )
    work_dir = table.get("work_dir", DEFAULT_WORK_DIR)
    if not isinstance(work_dir, str) or not work_dir.startswith(("/", "{home}")):
        raise ConfigError(
            f"{source}: [workloads] work_dir must be an absolute path template "
            f"(placeholders {', '.join(_PLACEHOLDERS)}), got {work_dir!r}"
        )
    try:
        work_dir.format(home="/h", user="u", id="w-1")
    except (KeyError, IndexError, ValueError) as exc:
        raise ConfigError(
            f"{source}: [workloads] work_dir may use only {', '.join(_PLACEHOLDERS)}: {exc}"
        ) from None
    launcher = table.get("launcher", "auto")
    if launcher not in LAUNCHERS:
        raise ConfigError(
            f"{source}: [workloads] launcher must be one of {', '.join(map(repr, LAUNCHERS))}, "
            f"got {launcher!r}"
        )
    limits = {key: _seconds(table, key, source) for key in _LIMIT_KEYS if key in table}
    settings = WorkloadSettings(dict(accounts), work_dir, launcher, **limits)
    if settings.max_time_limit_s and settings.default_time_limit_s > settings.max_time_limit_s:
        raise ConfigError(
            f"{source}: [workloads] default_time_limit_s ({settings.default_time_limit_s}) "
            f"exceeds max_time_limit_s ({settings.max_time_limit_s})"
        )
    return settings


_LIMIT_KEYS = ("default_time_limit_s", "max_time_limit_s", "time_limit_grace_s")


def _seconds(table: dict[str, Any], key: str, source: str) -> int:
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 366 * 86400:
        raise ConfigError(
            f"{source}: [workloads] {key} must be whole seconds from 0 to {366 * 86400}, "
            f"got {value!r}"
        )
    return value
