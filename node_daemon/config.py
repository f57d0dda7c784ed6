"""The daemon's configuration: defaults, a TOML file, then command-line flags.

Every option has a default, a type and a description (see OPTIONS); a bad value
is reported with the file, the key and what is expected.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpufleet.policy import team_name
from node_daemon.alerts.am_settings import AlertmanagerSettings, parse_alertmanager
from node_daemon.alerts.rules import AlertSettings, parse_alert_settings
from node_daemon.auth.settings import AuthSettings, parse_auth
from node_daemon.control.settings import WorkloadSettings, parse_workload_settings
from node_daemon.errors import ConfigError, read_toml
from node_daemon.healing.settings import HealingSettings, parse_healing_settings
from node_daemon.health.settings import HealthSettings, parse_health_settings
from node_daemon.history.settings import HistorySettings, parse_history_settings
from node_daemon.listen import ListenAddressError, parse_listen_address
from node_daemon.sampling.pace import PaceSettings
from node_daemon.usage.settings import UsageSettings, parse_usage_settings

__all__ = ["OPTIONS", "ConfigError", "DaemonConfig", "load_config_file", "validate"]


@dataclass(frozen=True)
class ReloadSettings:
    """[reload]: what a reload (SIGHUP) may do that it otherwise refuses.

    `allow_weaker_security`: apply a file that lowers the security posture
    (node_daemon.security_posture); read from the new file, never from the one in force.
    """

    allow_weaker_security: bool = False


@dataclass(frozen=True)
class DaemonConfig:
    listen: str = "127.0.0.1:50051"
    backend: str = "auto"
    gpus: int = 8
    seed: int = 0
    model: str | None = None
    scenario: Path | None = None
    sim_speed: float = 1.0
    # A demo node (`--demo`, simulated only): node_daemon/control/accounts.py, own_account.
    demo: bool = False
    sample_interval_s: float = 1.0
    process_interval_s: float = 3.0
    # Adaptive sampling (node_daemon/sampling/pace.py): GPUs near a temperature line.
    fast_sample_interval_s: float = 0.1
    fast_sample_margin_c: float = 5.0
    fast_sample_lookahead_s: float = 3.0
    history_seconds: int = 3600
    max_streams: int = 64
    max_streams_per_client: int = 16
    insecure: bool = False
    ready_file: Path | None = None
    hostname: str | None = None
    state_dir: Path | None = None
    alertmanager_urls: tuple[str, ...] = ()
    allow_kill_job_processes: bool = False
    teams: dict[str, tuple[str, ...]] = field(default_factory=dict)
    metrics_listen: str | None = None
    metrics_hostname_label: str = "Hostname"
    usage_flush_interval_s: float = 5.0
    auth: AuthSettings = field(default_factory=AuthSettings)
    alerts: AlertSettings = field(default_factory=AlertSettings)
    alertmanager: AlertmanagerSettings = field(default_factory=AlertmanagerSettings)
    workloads: WorkloadSettings = field(default_factory=WorkloadSettings)
    healing: HealingSettings = field(default_factory=HealingSettings)
    health: HealthSettings = field(default_factory=HealthSettings)
    history: HistorySettings = field(default_factory=HistorySettings)
    usage: UsageSettings = field(default_factory=UsageSettings)
    reload: ReloadSettings = field(default_factory=ReloadSettings)

    @property
    def pace(self) -> PaceSettings:
        """Adaptive sampling's settings (the three fast_sample_* keys)."""
        return PaceSettings(
            self.fast_sample_interval_s, self.fast_sample_margin_c, self.fast_sample_lookahead_s
        )


OPTIONS: dict[str, str] = {
    "listen": "gRPC address HOST:PORT (port 0 picks a free one); loopback unless insecure",
    "backend": "auto (the default): this server's GPUs through NVML, never simulated; without "
    "a working driver the daemon serves degraded and retries. nvml: the same. simulated: only "
    "when asked for by name",
    "gpus": "number of GPUs of the simulated backend",
    "seed": "seed of the simulated backend (same seed, same readings)",
    "model": "simulated GPU model: h100, a100 or l40s (default: chosen by seed)",
    "scenario": "TOML file of scripted events for the simulated backend",
    "sim_speed": "simulated seconds per real second (demos and tests of slow physics)",
    "demo": "a demo node, with --backend simulated on loopback only: every workload runs as "
    "this daemon's own account under the owner's name (alice, root, team:ml...), the node "
    "starts with a simulated day of history, and its workloads end when it stops",
    "sample_interval_s": "seconds between sweeps of all GPUs (0.1 .. 60)",
    "process_interval_s": "seconds between reads of the GPU process lists (expensive in NVML)",
    "fast_sample_interval_s": "seconds between looks at the temperatures of a GPU near an "
    "alert line, between sweeps; a look across a line sweeps at once (0: off; 0.02 .. "
    "sample_interval_s; NVML only)",
    "fast_sample_margin_c": "a GPU within this many degrees of a gpu_temp or memory_temp "
    "line is near it (0 .. 30)",
    "fast_sample_lookahead_s": "a GPU that would cross a line within this many seconds at "
    "its last rate is near it too (0 .. 60)",
    "history_seconds": "how much sample history to keep in memory (at least 3600)",
    "max_streams": "most concurrent streams served (samples, events, health watches), in all",
    "max_streams_per_client": "most concurrent streams one client address may hold "
    "(a console holds 2)",
    "insecure": "allow listening beyond loopback without TLS and tokens (loud warnings)",
    "ready_file": "file to write the bound HOST:PORT into once serving",
    "hostname": "host name to report (default: this machine's)",
    "state_dir": "directory for the event journal (default: $STATE_DIRECTORY, "
    "else $XDG_STATE_HOME/gpufleet or ~/.local/state/gpufleet)",
    "alertmanager_urls": "Alertmanager base URLs to push alerts to (API v2); added to "
    "[alertmanager] urls, each URL once",
    "alertmanager": "the [alertmanager] table: urls, labels (on every pushed alert), "
    "resend_interval_s (30; 1 .. 3600), timeout_s (5), ca_file, cert_file, key_file, "
    "basic_auth_user with basic_auth_password_file, or bearer_token_file, watchdog (true: "
    "the GpufleetWatchdog heartbeat), critical_hold_s (86400: endsAt of a firing critical)",
    "allow_kill_job_processes": "let KillProcess signal processes of Slurm jobs (default: refuse)",
    "teams": "the [teams] table: team name = list of members (for reservations to team:NAME)",
    "metrics_listen": "HOST:PORT for Prometheus /metrics (dcgm-exporter names); off if unset",
    "auth": "the [auth] table (jwks_file, issuer, audience, leeway_s, user_claim, revoked_jti, "
    "revoked_users), [[auth.users]] (name, role, teams, token_sha256, token_expires) and [tls]",
    "usage_flush_interval_s": "seconds between writes of usage accounting to disk; a crash "
    "loses at most this much usage (1 .. 300)",
    "metrics_hostname_label": "label carrying the host name: Hostname (dcgm-exporter) or hostname",
    "alerts": "alert rules: the [alerts.RULE] tables (see docs/alerts.md)",
    "workloads": "the [workloads] table: accounts (owner = local account) and work_dir",
    "healing": "the [healing] table: self-healing's mode (off, dry-run, on), "
    "max_actions_per_hour and its actions (see docs/health.md)",
    "health": "the [health] table: the lines of the GPU health states and predictions "
    "(see docs/health.md)",
    "history": "the [history] table: the on-disk metric history's enabled, raw_retention_s, "
    "ten_second_retention_s, minute_retention_s, max_bytes, flush_interval_s "
    "(see docs/daemon.md, History)",
    "usage": "the [usage] table: sacct_poll_interval_s (300; 0 off) and [usage.prices] "
    "(currency, gpu_hour, kwh, busy_weight, allocated_weight; see docs/accounting.md)",
    "reload": "the [reload] table: allow_weaker_security (false; true: a reload may turn auth "
    "or TLS off, widen listen or turn insecure on, with a warning; see docs/daemon.md)",
}

_PATH_KEYS = {"scenario", "ready_file", "state_dir"}
_NUMBER = (int, float)
_TYPES: dict[str, tuple[type, ...]] = {
    "listen": (str,), "backend": (str,), "gpus": (int,), "seed": (int,), "model": (str,),
    "scenario": (str,), "sim_speed": _NUMBER, "demo": (bool,), "sample_interval_s": _NUMBER,
    "process_interval_s": _NUMBER, "fast_sample_interval_s": _NUMBER,
    "fast_sample_margin_c": _NUMBER, "fast_sample_lookahead_s": _NUMBER,
    "history_seconds": (int,), "max_streams": (int,),
    "max_streams_per_client": (int,),
    "insecure": (bool,), "ready_file": (str,), "hostname": (str,), "state_dir": (str,),
    "alertmanager_urls": (list,), "metrics_listen": (str,), "metrics_hostname_label": (str,),
    "allow_kill_job_processes": (bool,), "usage_flush_interval_s": _NUMBER,
}  # fmt: skip


def _coerce(key: str, value: Any, source: str) -> Any:
    if key == "alertmanager_urls":
        return _urls(value, source)
    expected = _TYPES[key]
    if (isinstance(value, bool) and bool not in expected) or not isinstance(value, expected):
        names = " or ".join(t.__name__ for t in expected)
        raise ConfigError(f"{source}: key {key!r} must be {names}, got {value!r}")
    return Path(str(value)) if key in _PATH_KEYS else value


def _teams(table: Any, source: str) -> dict[str, tuple[str, ...]]:
    ok = isinstance(table, dict) and all(
        isinstance(m, list) and all(isinstance(u, str) for u in m) for m in table.values()
    )
    if not ok:
        raise ConfigError(
            f'{source}: [teams] must map team names to lists of users, e.g. ml = ["alice"]'
        )
    # "team:ops" names team ops, as "ops" does: both keys are one team, its members merged.
    teams: dict[str, tuple[str, ...]] = {}
    for name, members in table.items():
        held = teams.get(team_name(name), ())
        teams[team_name(name)] = held + tuple(m for m in members if m not in held)
    return teams


def teams_of(config: DaemonConfig, user: str) -> tuple[str, ...]:
    """The holders a user counts as: team:NAME for each team the user is in."""
    teams = {team for team, members in config.teams.items() if user in members}
    teams |= {t for u in config.auth.users if u.name == user for t in u.teams}
    return tuple(f"team:{team}" for team in sorted(teams))


def _urls(value: Any, source: str) -> tuple[str, ...]:
    urls = value if isinstance(value, list) else [None]
    if not all(isinstance(u, str) and u.startswith(("http://", "https://")) for u in urls):
        raise ConfigError(f"{source}: alertmanager_urls must be a list of http(s):// URLs")
    return tuple(value)


def load_config_file(path: Path, base: DaemonConfig | None = None) -> DaemonConfig:
    """Read the [daemon] table of a TOML file over `base`."""
    data = read_toml(path, "config")
    table = data.get("daemon", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [daemon] must be a table")
    known_tables = {"daemon", "alerts", "alertmanager", "teams", "auth", "tls", "workloads",
                    "health", "healing", "history", "usage", "reload"}  # fmt: skip
    unknown_tables = sorted(set(data) - known_tables)
    if unknown_tables:
        raise ConfigError(f"{path}: unknown table(s) {', '.join(unknown_tables)}")
    unknown = sorted(set(table) - set(_TYPES))
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {', '.join(unknown)} in [daemon]")
    values = {k: _coerce(k, v, str(path)) for k, v in table.items()}
    alerts = data.get("alerts", {})
    if not isinstance(alerts, dict):
        raise ConfigError(f"{path}: [alerts] must be a table")
    values["alerts"] = parse_alert_settings(alerts, str(path))
    values["teams"] = _teams(data.get("teams", {}), str(path))
    values["auth"] = parse_auth(data, str(path))
    values["workloads"] = parse_workload_settings(data.get("workloads", {}), str(path))
    values["alertmanager"] = parse_alertmanager(data.get("alertmanager", {}), str(path))
    values["healing"] = parse_healing_settings(data.get("healing", {}), str(path))
    values["health"] = parse_health_settings(data.get("health", {}), str(path))
    values["history"] = parse_history_settings(data.get("history", {}), str(path))
    values["usage"] = parse_usage_settings(data.get("usage", {}), str(path))
    values["reload"] = _reload_settings(data.get("reload", {}), str(path))
    return validate(replace(base or DaemonConfig(), **values), str(path))


def _reload_settings(table: Any, source: str) -> ReloadSettings:
    if not isinstance(table, dict) or set(table) - {"allow_weaker_security"}:
        raise ConfigError(f"{source}: [reload] takes only allow_weaker_security (true or false)")
    allow = table.get("allow_weaker_security", False)
    if not isinstance(allow, bool):
        raise ConfigError(f"{source}: [reload] allow_weaker_security must be true or false")
    return ReloadSettings(allow)


def validate(config: DaemonConfig, source: str = "options") -> DaemonConfig:
    checks = [
        (config.backend in ("auto", "nvml", "simulated"), "backend", "auto, nvml or simulated"),
        (1 <= config.gpus <= 64, "gpus", "a number of GPUs from 1 to 64"),
        (0.1 <= config.sim_speed <= 100, "sim_speed", "a factor from 0.1 to 100"),
        (0.1 <= config.sample_interval_s <= 60, "sample_interval_s", "seconds from 0.1 to 60"),
        (config.process_interval_s >= config.sample_interval_s, "process_interval_s",
         "seconds, at least sample_interval_s"),
        (config.fast_sample_interval_s == 0
         or 0.02 <= config.fast_sample_interval_s <= config.sample_interval_s,
         "fast_sample_interval_s", "0 (off) or seconds from 0.02 to sample_interval_s"),
        (0 <= config.fast_sample_margin_c <= 30, "fast_sample_margin_c", "degrees from 0 to 30"),
        (0 <= config.fast_sample_lookahead_s <= 60, "fast_sample_lookahead_s",
         "seconds from 0 to 60"),
        (config.history_seconds >= 3600, "history_seconds", "at least 3600 seconds"),
        (1 <= config.max_streams <= 1024, "max_streams", "a number from 1 to 1024"),
        (1 <= config.max_streams_per_client <= 1024, "max_streams_per_client",
         "a number from 1 to 1024"),
        (1 <= config.usage_flush_interval_s <= 300, "usage_flush_interval_s",
         "seconds from 1 to 300"),
        (config.metrics_hostname_label in ("Hostname", "hostname"), "metrics_hostname_label",
         "Hostname or hostname"),
    ]  # fmt: skip
    for ok, key, expected in checks:
        if not ok:
            raise ConfigError(f"{source}: {key} must be {expected}, got {getattr(config, key)!r}")
    _check_demo(config, source)
    try:
        alertmanager_settings(config)  # the URLs of flags and [daemon] too
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    return config


def _check_demo(config: DaemonConfig, source: str) -> None:
    """A demo node runs anyone's workload as its own account: only simulated, only loopback."""
    if not config.demo:
        return
    if config.backend != "simulated":
        raise ConfigError(
            f"{source}: --demo is for a simulated node only (--backend simulated), not backend "
            f"{config.backend!r}: a demo node runs every owner's workload as its own account, "
            "which a server with real GPUs must never do"
        )
    try:
        loopback = parse_listen_address(config.listen).is_loopback
    except ListenAddressError:
        return  # the daemon's start says what is wrong with the address
    if not loopback:
        raise ConfigError(
            f"{source}: --demo listens on loopback only (127.0.0.1:PORT), not {config.listen}: "
            "a demo node runs every owner's workload as its own account"
        )


def alertmanager_settings(config: DaemonConfig) -> AlertmanagerSettings:
    """[alertmanager] with the URLs of [daemon] alertmanager_urls (and --alertmanager) added."""
    return config.alertmanager.with_urls(config.alertmanager_urls)


def resolve_state_dir(config: DaemonConfig) -> Path:
    """Where the journal lives: configured, systemd's StateDirectory, or the XDG state home."""
    if config.state_dir is not None:
        return config.state_dir
    if os.environ.get("STATE_DIRECTORY"):
        return Path(os.environ["STATE_DIRECTORY"].split(":")[0])
    xdg = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(xdg) / "gpufleet"
