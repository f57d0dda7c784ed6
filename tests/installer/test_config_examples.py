"""The example configs load, and daemon.toml documents every option with its true default.

installer/config/daemon.toml lists each option as `#key = default` (and options
whose default is "unset" as `# e.g. key = ...`). Uncommenting every `#key =`
line and `#[table]` header must load to the very same configuration as the
file as shipped: so a documented default cannot drift from the code.
"""

from __future__ import annotations

import re
from dataclasses import fields, is_dataclass, replace
from pathlib import Path

from console.settings import load_settings
from node_daemon.alerts.am_settings import AlertmanagerSettings
from node_daemon.alerts.rules import AlertSettings
from node_daemon.auth.settings import AuthSettings, TlsSettings
from node_daemon.config import DaemonConfig, ReloadSettings, load_config_file
from node_daemon.control.settings import WorkloadSettings
from node_daemon.healing.settings import HealingSettings
from node_daemon.health.settings import HealthSettings
from node_daemon.history.settings import HistorySettings
from tests.installer.tools import CONSOLE_TOML, DAEMON_TOML

# The one option the shipped file sets: a GPU server must not fall back to
# simulated GPUs (see the comment in the file).
SHIPPED = replace(DaemonConfig(), backend="nvml")
DEFAULT_LINE = re.compile(r"^#(?=\[|[a-z_]+ = )", re.MULTILINE)


def test_daemon_toml_loads_as_shipped() -> None:
    assert load_config_file(DAEMON_TOML) == SHIPPED


def test_every_commented_default_is_the_real_default(tmp_path: Path) -> None:
    uncommented = tmp_path / "daemon.toml"
    text, count = DEFAULT_LINE.subn("", DAEMON_TOML.read_text(encoding="utf-8"))
    uncommented.write_text(text, encoding="utf-8")
    assert count > 50, "the commented defaults went missing"
    assert load_config_file(uncommented) == SHIPPED


def documented_keys(text: str) -> dict[str, set[str]]:
    """Keys named in `#key = `, `# e.g. key = ` or `key = ` lines, by [table]."""
    keys: dict[str, set[str]] = {}
    table = ""
    for line in text.splitlines():
        line = line.removeprefix("#").strip().removeprefix("e.g.").strip()
        if header := re.fullmatch(r"\[\[?([a-z_.]+)\]\]?", line):
            table = header.group(1)
        elif key := re.match(r"([a-z_]+) = ", line):
            keys.setdefault(table, set()).add(key.group(1))
    return keys


def test_every_option_and_alert_rule_is_documented() -> None:
    keys = documented_keys(DAEMON_TOML.read_text(encoding="utf-8"))
    # DaemonConfig fields that are tables of their own
    tables = {"alerts", "alertmanager", "teams", "auth", "workloads", "health", "healing",
              "history", "usage", "reload"}  # fmt: skip
    options = {f.name for f in fields(DaemonConfig)} - tables
    assert options - keys["daemon"] == set(), "add these options to installer/config/daemon.toml"
    assert {"teams", "auth.users", "tls"} <= set(keys)
    assert {f.name for f in fields(TlsSettings)} <= keys["tls"]
    auth_keys = {f.name for f in fields(AuthSettings)} - {"users", "tls", "jwks"}
    assert auth_keys <= keys["auth"], "document these keys under [auth]"
    assert {f.name for f in fields(WorkloadSettings)} <= keys["workloads"]
    assert {f.name for f in fields(HealthSettings)} <= keys["health"], "document under [health]"
    assert {f.name for f in fields(HistorySettings)} <= keys["history"], "document under [history]"
    assert {f.name for f in fields(ReloadSettings)} <= keys["reload"], "document under [reload]"
    healing = HealingSettings()
    for table in ("drain", "power_cap", "memory_leak", "reset", "reboot"):
        table_keys = {f.name for f in fields(getattr(healing, table))}
        assert table_keys <= keys[f"healing.{table}"], f"document under [healing.{table}]"
    healing_keys = {f.name for f in fields(healing) if not is_dataclass(getattr(healing, f.name))}
    assert healing_keys <= keys["healing"], "document these keys under [healing]"
    am_keys = {f.name for f in fields(AlertmanagerSettings)} - {"auth"}
    am_keys |= {"basic_auth_user", "basic_auth_password_file", "bearer_token_file"}
    assert am_keys <= keys["alertmanager"], "document these keys under [alertmanager]"
    for rule in fields(AlertSettings):
        rule_keys = {f.name for f in fields(getattr(AlertSettings(), rule.name))} - {"models"}
        missing = rule_keys - keys.get(f"alerts.{rule.name}", set())
        assert missing == set(), f"document these keys under [alerts.{rule.name}]"


def test_console_toml_loads() -> None:
    assert load_settings(CONSOLE_TOML).nodes == ("gpu-node-01:50051", "gpu-node-02:50051")
