"""The console's settings: a TOML file in the user's config directory, one profile per fleet.

# ~/.config/gpufleet/console.toml
profile = "prod"                  # the profile used without --profile

[profiles.prod]
nodes = ["gpu-node-01:50051", "gpu-node-02:50051"]
ca = "~/.config/gpufleet/prod-ca.pem"         # TLS: the CA of the nodes' certificates
client_cert = "~/.config/gpufleet/me.crt"     # optional: mutual TLS
client_key = "~/.config/gpufleet/me.key"
token_file = "~/.config/gpufleet/prod.token"  # optional, mode 0600: only without a keyring
# token_command = "sso-token --audience gpufleet"  # or: a command that prints the token
people = ["alice", "team:ml"]

theme = "auto"                    # "dark", "light", or "auto": the desktop's choice

[notify]                          # what pops up, for every profile (docs/alerts.md)
popup = { throttle_software = "critical", xid = "critical" }
budget_per_hour = 10

While `gpufleet demo` runs, its nodes are the profile "demo", from a file of
its own beside this one (console/demo_profile.py).

Tokens are never written here: `gpufleet console login --profile prod` puts
them in the system keyring (console/credentials.py).

The file of earlier versions, `nodes = [...]` and `people = [...]` at the
top level, still works: it is the profile "default" (plaintext, no TLS).
"""

from __future__ import annotations

import shlex
import tomllib
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import platformdirs

from console.connections.addresses import is_loopback_host
from console.demo_profile import DEMO_PROFILE, read_demo_profile
from console.fleet.notify_settings import NotifySettings, NotifySettingsError, parse_notify_settings

DEFAULT_PROFILE = "default"
LOGIN_HINT = "store it with `gpufleet console login --profile NAME` (system keyring)"
THEME_CHOICES = ("auto", "dark", "light")  # console/views/common/theme.py's themes, and auto
PROFILE_KEYS = {"nodes", "people", "ca", "client_cert", "client_key", "token_file", "token_command",
                "prometheus_url", "prometheus_ca_file", "prometheus_token_file",
                "slurm_url", "slurm_user", "slurm_token_command", "slurm_ca_file",
                "slurm_conf", "slurm_max_answer_mib", "slurm_timeout_s"}  # fmt: skip
# The file's own keys. Anything else is refused rather than ignored: a top-level
# `ca = ...` looked like TLS for every node and silently was not.
TOP_LEVEL_KEYS = {"nodes", "people", "profile", "notify", "profiles", "theme"}
# slurmrestd's answers: at most this big (v0.0.38 spends about 3.2 KB a job, so 5,000
# jobs), and each call's whole exchange within this many seconds (docs/console.md).
SLURM_MAX_ANSWER_MIB = 16
SLURM_TIMEOUT_S = 10.0
SLURM_MAX_ANSWER_RANGE = (1, 1024)
SLURM_TIMEOUT_RANGE = (1.0, 300.0)


class SettingsError(ValueError):
    pass


@dataclass(frozen=True)
class Profile:
    """One fleet: its nodes and how to reach them. Paths are expanded (~)."""

    name: str
    nodes: tuple[str, ...] = ()
    people: tuple[str, ...] = ()
    ca: Path | None = None
    client_cert: Path | None = None
    client_key: Path | None = None
    token_file: Path | None = None
    # argv of a command whose standard output is the token (shlex-split, no shell).
    token_command: tuple[str, ...] | None = None
    # A Prometheus-compatible store that scrapes the nodes: the plots' older ranges.
    prometheus_url: str | None = None
    prometheus_ca_file: Path | None = None
    prometheus_token_file: Path | None = None  # a bearer token for it
    notify: NotifySettings = field(default_factory=NotifySettings)  # the file's [notify]
    theme: str = "auto"  # the file's theme, for every profile
    # slurmrestd and whose Slurm token to send (console/slurm_token.py finds the token).
    slurm: SlurmProfile | None = None

    @property
    def tls(self) -> bool:
        return self.ca is not None


@dataclass(frozen=True)
class SlurmProfile:
    """Where the fleet's Slurm answers: slurmrestd, the Slurm user, how to get its token."""

    url: str
    user: str
    token_command: tuple[str, ...] | None = None  # else the keyring's "PROFILE/slurm"
    ca_file: Path | None = None
    conf: Path | None = None  # slurm.conf for scontrol (drain, resume); else Slurm's default
    max_answer_bytes: int = SLURM_MAX_ANSWER_MIB << 20  # a bigger answer is refused, unread
    timeout_s: float = SLURM_TIMEOUT_S  # one call, all of it: connect, send, every read


@dataclass(frozen=True)
class ConsoleSettings:
    nodes: tuple[str, ...] = ()
    people: tuple[str, ...] = ()
    default_profile: str | None = None
    profiles: Mapping[str, Profile] = field(default_factory=dict)
    path: Path | None = None
    notify: NotifySettings = field(default_factory=NotifySettings)
    theme: str = "auto"
    # Profiles named but not usable now, and why (a demo that has ended: demo_profile.py).
    unusable: Mapping[str, str] = field(default_factory=dict)

    def profile(self, name: str | None = None) -> Profile:
        """The profile asked for, else the default one, else the top-level nodes.

        Raises:
            SettingsError: a profile is named that the file does not have.
        """
        chosen = name or self.default_profile
        if chosen is None or (chosen == DEFAULT_PROFILE and chosen not in self.profiles):
            return Profile(chosen or DEFAULT_PROFILE, self.nodes, self.people, notify=self.notify,
                           theme=self.theme)  # fmt: skip
        if chosen not in self.profiles and chosen in self.unusable:
            raise SettingsError(self.unusable[chosen])
        if chosen not in self.profiles:
            known = ", ".join(sorted(self.profiles)) or "none"
            where = self.path or default_settings_path()
            hint = "; `gpufleet demo` writes it while it runs" if chosen == DEMO_PROFILE else ""
            raise SettingsError(f"no profile {chosen!r} in {where} (profiles: {known}){hint}")
        return self.profiles[chosen]


def default_settings_path() -> Path:
    return Path(platformdirs.user_config_dir("gpufleet")) / "console.toml"


def load_settings(path: Path | None = None) -> ConsoleSettings:
    """Read settings; a missing default file is an empty fleet, a missing named file an error."""
    explicit = path is not None
    path = path or default_settings_path()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        if explicit:
            raise SettingsError(f"console settings {path} do not exist") from None
        profiles: dict[str, Profile] = {}
        unusable = _add_demo_profile(profiles, ())
        return ConsoleSettings(path=path, profiles=profiles, unusable=unusable)
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"console settings {path} are not valid TOML: {exc}") from exc
    if "token" in data:
        raise SettingsError(f"{path}: a token does not belong in this file; {LOGIN_HINT}")
    _refuse_unknown_top_level(data, path)
    nodes, people = _nodes(data, str(path)), _people(data, str(path))
    default = data.get("profile")
    if default is not None and (not isinstance(default, str) or not default):
        raise SettingsError(f"{path}: 'profile' must be the name of a profile")
    notify = _notify(data, path)
    profiles = _profiles(data.get("profiles", {}), path, people)
    theme = _theme(data, path)
    unusable = _add_demo_profile(profiles, people)
    profiles = {name: replace(p, notify=notify, theme=theme) for name, p in profiles.items()}
    return ConsoleSettings(nodes, people, default, profiles, path, notify, theme, unusable)


def _add_demo_profile(profiles: dict[str, Profile], people: tuple[str, ...]) -> dict[str, str]:
    """The running demo's profile into `profiles` (the file's own `demo` wins); else why not.

    A demo that has ended or a damaged file makes only that profile unusable,
    never the settings: every other profile still works.
    """
    found = read_demo_profile()
    if found is None or DEMO_PROFILE in profiles:
        return {}
    if found.table is None:
        return {DEMO_PROFILE: found.unusable}
    try:
        profiles[DEMO_PROFILE] = _profile(DEMO_PROFILE, found.table, found.path, people)
    except SettingsError as exc:
        return {DEMO_PROFILE: f"{exc}; remove it, or start `gpufleet demo` again"}
    return {}


def _theme(data: Mapping[str, Any], path: Path) -> str:
    theme = data.get("theme", "auto")
    if theme not in THEME_CHOICES:
        raise SettingsError(f"{path}: 'theme' must be one of {', '.join(THEME_CHOICES)}, "
                            f"not {theme!r}")  # fmt: skip
    return str(theme)


def _refuse_unknown_top_level(data: Mapping[str, Any], path: Path) -> None:
    unknown = sorted(set(data) - TOP_LEVEL_KEYS)
    if not unknown:
        return
    misplaced = [key for key in unknown if key in PROFILE_KEYS]
    hint = f"; {', '.join(misplaced)} belong(s) in a profile: [profiles.NAME]" if misplaced else ""
    raise SettingsError(f"{path}: unknown key(s) {', '.join(unknown)}{hint}")


def _notify(data: Mapping[str, Any], path: Path) -> NotifySettings:
    try:
        return parse_notify_settings(data.get("notify", {}), str(path))
    except NotifySettingsError as exc:
        raise SettingsError(str(exc)) from None


def _nodes(data: Mapping[str, Any], where: str) -> tuple[str, ...]:
    nodes = data.get("nodes", [])
    if not isinstance(nodes, list) or not all(isinstance(n, str) and ":" in n for n in nodes):
        raise SettingsError(f"{where}: 'nodes' must be a list of \"HOST:PORT\" strings")
    return tuple(nodes)


def _people(data: Mapping[str, Any], where: str) -> tuple[str, ...]:
    people = data.get("people", [])
    if not isinstance(people, list) or not all(isinstance(p, str) and p.strip() for p in people):
        raise SettingsError(f"{where}: 'people' must be a list of user names or \"team:NAME\"")
    return tuple(p.strip() for p in people)


def _profiles(raw: Any, path: Path, people: tuple[str, ...]) -> dict[str, Profile]:
    if not isinstance(raw, dict):
        raise SettingsError(f"{path}: [profiles] must be a table of [profiles.NAME] tables")
    return {name: _profile(name, table, path, people) for name, table in raw.items()}


def _profile(name: str, table: Any, path: Path, people: tuple[str, ...]) -> Profile:
    where = f"{path}: [profiles.{name}]"
    if not isinstance(table, dict):
        raise SettingsError(f"{where} must be a table")
    if "token" in table:
        raise SettingsError(f"{where}: a token does not belong in this file; {LOGIN_HINT}")
    unknown = sorted(set(table) - PROFILE_KEYS)
    if unknown:
        raise SettingsError(f"{where}: unknown key(s) {', '.join(unknown)}")
    cert, key = _path(table, "client_cert", where), _path(table, "client_key", where)
    if (cert is None) != (key is None):
        raise SettingsError(f"{where}: mutual TLS needs both client_cert and client_key")
    ca = _path(table, "ca", where)
    if cert is not None and ca is None:
        raise SettingsError(f"{where}: a client certificate needs TLS: set ca as well")
    token_file, command = _path(table, "token_file", where), _command(table, where)
    if token_file is not None and command is not None:
        raise SettingsError(f"{where}: token_file and token_command both say where the token "
                            "comes from: keep one")  # fmt: skip
    return Profile(
        name, _nodes(table, where), _people(table, where) if "people" in table else people,
        ca, cert, key, token_file, command, *_prometheus(table, where),
        slurm=_slurm(table, where),
    )  # fmt: skip


def _slurm(table: Mapping[str, Any], where: str) -> SlurmProfile | None:
    """slurm_url and the rest; the token goes with every call, so never in clear beyond here."""
    keys = ("slurm_user", "slurm_token_command", "slurm_ca_file", "slurm_conf",
            "slurm_max_answer_mib", "slurm_timeout_s")  # fmt: skip
    url = table.get("slurm_url")
    if url is None:
        if any(k in table for k in keys):
            raise SettingsError(f"{where}: {', '.join(k for k in keys if k in table)} need(s) "
                                "slurm_url")  # fmt: skip
        return None
    parts = urllib.parse.urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise SettingsError(f"{where}: slurm_url must be an http:// or https:// URL, not {url!r}")
    if parts.scheme == "http" and not is_loopback_host(parts.hostname):
        raise SettingsError(f"{where}: slurm_url {url} is plain http beyond this machine: the "
                            "Slurm token would cross the network in clear; use https")  # fmt: skip
    user = table.get("slurm_user")
    if not isinstance(user, str) or not user.strip():
        raise SettingsError(f"{where}: slurm_url needs slurm_user, your Slurm user name")
    command = _command(table, where, "slurm_token_command")
    mib = _number(table, where, "slurm_max_answer_mib", SLURM_MAX_ANSWER_MIB,
                  SLURM_MAX_ANSWER_RANGE, whole=True)  # fmt: skip
    timeout_s = _number(table, where, "slurm_timeout_s", SLURM_TIMEOUT_S, SLURM_TIMEOUT_RANGE)
    return SlurmProfile(url, user.strip(), command, _path(table, "slurm_ca_file", where),
                        _path(table, "slurm_conf", where), int(mib) << 20,
                        float(timeout_s))  # fmt: skip


def _number(table: Mapping[str, Any], where: str, key: str, default: float,
            bounds: tuple[float, float], whole: bool = False) -> float:  # fmt: skip
    """A number key within its bounds (a whole number where `whole`), or its default."""
    value = table.get(key, default)
    low, high = bounds
    number = isinstance(value, int) or (isinstance(value, float) and not whole)
    if isinstance(value, bool) or not number or not low <= value <= high:
        kind = "a whole number" if whole else "a number"
        raise SettingsError(f"{where}: {key} must be {kind} from {low:g} to {high:g}, "
                            f"not {value!r}")  # fmt: skip
    return float(value)


def _prometheus(
    table: Mapping[str, Any], where: str
) -> tuple[str | None, Path | None, Path | None]:
    """prometheus_url and its CA and token files; a token never crosses a network in clear."""
    url, ca_file = table.get("prometheus_url"), _path(table, "prometheus_ca_file", where)
    token_file = _path(table, "prometheus_token_file", where)
    if url is None:
        if ca_file is not None or token_file is not None:
            raise SettingsError(f"{where}: prometheus_ca_file and prometheus_token_file need "
                                "prometheus_url")  # fmt: skip
        return None, None, None
    parts = urllib.parse.urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise SettingsError(f"{where}: prometheus_url must be an http:// or https:// URL, "
                            f"not {url!r}")  # fmt: skip
    if parts.scheme == "http" and token_file is not None and not is_loopback_host(parts.hostname):
        raise SettingsError(f"{where}: prometheus_url {url} is plain http beyond this machine: "
                            "the token would cross the network in clear; use https")  # fmt: skip
    return url, ca_file, token_file


def _command(
    table: Mapping[str, Any], where: str, key: str = "token_command"
) -> tuple[str, ...] | None:
    """token_command as argv: split like a POSIX shell would, but run without one."""
    value = table.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise SettingsError(f"{where}: {key} must be a command line (a string)")
    try:
        argv = tuple(shlex.split(value))
    except ValueError as exc:
        raise SettingsError(f"{where}: {key} {value!r} cannot be split: {exc}") from None
    return argv


def _path(table: Mapping[str, Any], key: str, where: str) -> Path | None:
    value = table.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise SettingsError(f"{where}: {key} must be a file path")
    return Path(value).expanduser()
