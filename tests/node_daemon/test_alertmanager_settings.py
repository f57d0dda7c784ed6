"""The [alertmanager] table: defaults, merging with [daemon] alertmanager_urls, clear errors."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from node_daemon.alerts.am_client import AmTransport, authorization
from node_daemon.alerts.am_settings import AlertmanagerSettings, BasicAuth, BearerToken
from node_daemon.commands.main import add_daemon_command, daemon_config
from node_daemon.config import ConfigError, alertmanager_settings, load_config_file
from tests.certs import Authority, write


def config_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "daemon.toml"
    path.write_text(text)
    return path


def load(tmp_path: Path, text: str) -> AlertmanagerSettings:
    return alertmanager_settings(load_config_file(config_file(tmp_path, text)))


def secret(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_defaults_without_a_table(tmp_path: Path) -> None:
    settings = load(tmp_path, "[daemon]\n")
    assert settings == AlertmanagerSettings()
    assert (settings.resend_interval_s, settings.timeout_s) == (30.0, 5.0)
    assert settings.watchdog is True
    assert settings.critical_hold_s == 86400.0
    assert settings.auth is None and settings.urls == ()


def test_daemon_urls_and_table_urls_merge_each_once(tmp_path: Path) -> None:
    settings = load(
        tmp_path,
        """
[daemon]
alertmanager_urls = ["http://10.0.0.1:9093/", "http://10.0.0.3:9093"]
[alertmanager]
urls = ["http://10.0.0.1:9093", "http://10.0.0.2:9093"]
resend_interval_s = 10
timeout_s = 2
critical_hold_s = 3600
watchdog = false
labels = { cluster = "a", site = "b", rack = "r1" }
""",
    )
    assert settings.urls == ("http://10.0.0.1:9093", "http://10.0.0.2:9093", "http://10.0.0.3:9093")
    assert (settings.resend_interval_s, settings.timeout_s) == (10.0, 2.0)
    assert (settings.critical_hold_s, settings.watchdog) == (3600.0, False)
    assert settings.node_labels("gpu-node-01") == {
        "node": "gpu-node-01", "cluster": "a", "site": "b", "rack": "r1",
    }  # fmt: skip


def test_a_configured_node_label_wins_over_the_host_name(tmp_path: Path) -> None:
    settings = load(tmp_path, '[alertmanager]\nlabels = { node = "rack3-gpu7" }\n')
    assert settings.node_labels("localhost") == {"node": "rack3-gpu7"}


def test_command_line_urls_join_the_config_file_s(tmp_path: Path) -> None:
    path = config_file(tmp_path, '[alertmanager]\nurls = ["http://127.0.0.1:9093"]\n')
    parser = argparse.ArgumentParser()
    add_daemon_command(parser.add_subparsers())
    args = parser.parse_args(
        ["daemon", "--config", str(path), "--alertmanager", "http://127.0.0.1:9094"]
    )
    settings = alertmanager_settings(daemon_config(args))
    assert settings.urls == ("http://127.0.0.1:9093", "http://127.0.0.1:9094")


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("resend_interval_s = 0.5", "resend_interval_s must be seconds from 1 to 3600, got 0.5"),
        ("resend_interval_s = 7200", "resend_interval_s must be seconds from 1 to 3600"),
        ('resend_interval_s = "30"', "resend_interval_s must be seconds"),
        ("critical_hold_s = 60", "critical_hold_s must be seconds at least 120"),
        ("timeout_s = 0", "timeout_s must be seconds from 0.1 to 300"),
        ("watchdog = 1", "watchdog must be true or false"),
        ('urls = "http://x:9093"', "urls must be a list of http(s):// URLs"),
        ('urls = ["x:9093"]', "must start with http:// or https://: 'x:9093'"),
        ('urls = ["https://u:p@x:9093"]', "must not hold credentials"),
        ('labels = { severity = "x" }', "labels: node label 'severity' clashes"),
        ('labels = { "rack-no" = "x" }', "labels: invalid Alertmanager label name 'rack-no'"),
        ('labels = { rack = "" }', "labels: node label 'rack' must have a non-empty"),
        ("labels = { rack = 3 }", "labels: node label 'rack' must have a non-empty string"),
        ("colour = 1", "unknown key(s) colour in [alertmanager]"),
        ('ca_file = "/nonexistent/ca.crt"', "ca_file: cannot read /nonexistent/ca.crt"),
        ('key_file = "/etc/hostname"', "key_file needs cert_file"),
        ('basic_auth_user = "am"', "basic_auth_user needs basic_auth_password_file"),
        ('bearer_token_file = "/nonexistent/t"', "bearer_token_file: cannot read /nonexistent/t"),
        ('basic_auth_user = "a:b"\nbasic_auth_password_file = "/etc/hostname"', "without ':'"),
    ],
)
def test_bad_values_name_the_key(tmp_path: Path, table: str, message: str) -> None:
    with pytest.raises(ConfigError, match="alertmanager") as raised:
        load(tmp_path, f"[alertmanager]\n{table}\n")
    assert message in str(raised.value)
    assert str(tmp_path / "daemon.toml") in str(raised.value)


def test_secrets_come_from_files_trimmed_and_never_show(tmp_path: Path) -> None:
    password = secret(tmp_path, "pw", "s3cret-pw\n")
    settings = load(
        tmp_path,
        f"""
[alertmanager]
urls = ["https://am.example:9093"]
basic_auth_user = "gpufleet"
basic_auth_password_file = "{password}"
""",
    )
    assert settings.auth == BasicAuth("gpufleet", "s3cret-pw")
    assert "s3cret" not in repr(settings)
    assert authorization(settings) == "Basic Z3B1ZmxlZXQ6czNjcmV0LXB3"  # base64 of user:password

    token = secret(tmp_path, "token", "  tok-123  \n")
    bearer = load(tmp_path, f'[alertmanager]\nbearer_token_file = "{token}"\n')
    assert bearer.auth == BearerToken("tok-123")
    assert "tok-123" not in repr(bearer)
    assert authorization(bearer) == "Bearer tok-123"


def test_an_empty_secret_file_is_an_error(tmp_path: Path) -> None:
    empty = secret(tmp_path, "empty", "\n")
    with pytest.raises(ConfigError, match=r"bearer_token_file: .*empty is empty"):
        load(tmp_path, f'[alertmanager]\nbearer_token_file = "{empty}"\n')


def test_an_unreadable_secret_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="basic_auth_password_file: cannot read"):
        load(
            tmp_path,
            f'[alertmanager]\nbasic_auth_user = "a"\nbasic_auth_password_file = "{tmp_path}"\n',
        )


def test_both_ways_of_authenticating_is_an_error(tmp_path: Path) -> None:
    password, token = secret(tmp_path, "pw", "p"), secret(tmp_path, "token", "t")
    with pytest.raises(ConfigError, match=r"sets both .* choose one"):
        load(
            tmp_path,
            f"""
[alertmanager]
basic_auth_user = "a"
basic_auth_password_file = "{password}"
bearer_token_file = "{token}"
""",
        )


@pytest.mark.parametrize("where", ["table", "daemon"])
def test_credentials_over_plain_http_beyond_loopback_are_refused(
    tmp_path: Path, where: str
) -> None:
    token = secret(tmp_path, "token", "t")
    urls = 'urls = ["http://10.1.2.3:9093"]' if where == "table" else ""
    daemon = '[daemon]\nalertmanager_urls = ["http://10.1.2.3:9093"]' if where == "daemon" else ""
    text = f'{daemon}\n[alertmanager]\n{urls}\nbearer_token_file = "{token}"\n'
    with pytest.raises(ConfigError, match=r"refusing to send credentials \(bearer_token_file\) "
                       r"over plain http:// to http://10.1.2.3:9093"):  # fmt: skip
        load(tmp_path, text)


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:9093", "http://localhost:9093", "http://[::1]:9093", "https://x:1"]
)
def test_credentials_to_loopback_or_over_https_are_fine(tmp_path: Path, url: str) -> None:
    token = secret(tmp_path, "token", "t")
    settings = load(tmp_path, f'[alertmanager]\nurls = ["{url}"]\nbearer_token_file = "{token}"\n')
    assert settings.urls == (url,)


def test_a_bad_ca_or_client_certificate_is_a_config_error(tmp_path: Path) -> None:
    not_pem = secret(tmp_path, "not.pem", "hello")
    with pytest.raises(ConfigError, match=r"ca_file .*not a PEM CA file"):
        AmTransport(AlertmanagerSettings(ca_file=not_pem))
    authority = Authority()
    cert, _key = write(tmp_path, "client", authority.issue("gpufleet"))
    other_key = write(tmp_path, "other", authority.issue("other"))[1]
    with pytest.raises(ConfigError, match=r"cert_file .* key_file .*not a PEM certificate"):
        AmTransport(AlertmanagerSettings(cert_file=cert, key_file=other_key))
