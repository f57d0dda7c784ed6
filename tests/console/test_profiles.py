"""Profiles, credentials and `gpufleet console login`: where tokens go, and where never."""

from __future__ import annotations

import io
import stat
from pathlib import Path

import pytest

from console.connections.security import LinkSecurity
from console.credentials import (
    SERVICE,
    CredentialError,
    default_token_file,
    find_token,
    link_security,
    store_token,
)
from console.settings import Profile, SettingsError, load_settings
from node_daemon.commands.main import main as gpufleet
from tests.console.conftest import MemoryKeyring

TOKEN = "gft_" + "s3cr3t" * 7

SETTINGS = """
profile = "prod"
people = ["alice"]

[profiles.prod]
nodes = ["gpu-01:50051", "gpu-02:50051"]
ca = "~/prod-ca.pem"

[profiles.lab]
nodes = ["lab-01:50051"]
ca = "/etc/lab/ca.pem"
client_cert = "/etc/lab/me.crt"
client_key = "/etc/lab/me.key"
token_file = "/etc/lab/token"
people = ["bob", "team:ml"]
"""


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# -- settings -------------------------------------------------------------------------


def test_profiles_default_and_named(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path / "console.toml", SETTINGS))
    prod = settings.profile()
    assert (prod.name, prod.nodes, prod.tls, prod.people) == (
        "prod", ("gpu-01:50051", "gpu-02:50051"), True, ("alice",)
    )  # fmt: skip
    assert prod.ca == Path.home() / "prod-ca.pem" and prod.client_cert is None
    lab = settings.profile("lab")
    assert lab.client_cert == Path("/etc/lab/me.crt") and lab.token_file == Path("/etc/lab/token")
    assert lab.people == ("bob", "team:ml")
    with pytest.raises(SettingsError, match=r"no profile .staging. .*\(profiles: lab, prod\)"):
        settings.profile("staging")


def test_the_old_file_is_the_default_profile(tmp_path: Path) -> None:
    path = write(tmp_path / "console.toml", 'nodes = ["a:1"]\npeople = ["bob"]\n')
    profile = load_settings(path).profile()
    assert profile == Profile("default", ("a:1",), ("bob",))
    assert not profile.tls


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('token = "gft_x"\n', "a token does not belong in this file"),
        ('[profiles.p]\nnodes = ["a:1"]\ntoken = "gft_x"\n', "a token does not belong"),
        ('[profiles.p]\nnodes = ["a:1"]\nca = "c"\nclient_cert = "x"\n', "needs both"),
        ('[profiles.p]\nnodes = ["a:1"]\nclient_cert = "x"\nclient_key = "y"\n', "set ca"),
        ('[profiles.p]\nnodes = ["a"]\n', "HOST:PORT"),
        ('[profiles.p]\nnodez = ["a:1"]\n', "unknown key"),
        ('ca = "ca.pem"\nnodes = ["a:1"]\n', r"unknown key\(s\) ca; ca belong\(s\) in a profile"),
        ('nodez = ["a:1"]\n', r"unknown key\(s\) nodez"),
    ],
)
def test_bad_profiles_are_refused_with_a_reason(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        load_settings(write(tmp_path / "console.toml", text))


# -- credentials ----------------------------------------------------------------------


def test_token_from_the_keyring_first(memory_keyring: MemoryKeyring, monkeypatch) -> None:
    monkeypatch.setenv("GPUFLEET_TOKEN", "from-env")
    profile = Profile("prod", ("a:1",))
    assert find_token(profile).value == "from-env"  # nothing in the keyring yet
    where = store_token(profile, f"  {TOKEN}\n")
    assert memory_keyring.passwords == {(SERVICE, "prod"): TOKEN}
    assert "system keyring" in where and "'prod'" in where
    token = find_token(profile)
    assert token.value == TOKEN and "system keyring" in token.source
    assert TOKEN not in token.source


def test_without_a_keyring_the_token_file_is_private(isolated_config: Path) -> None:
    profile = Profile("lab", ("a:1",))
    where = store_token(profile, TOKEN)
    path = default_token_file("lab")
    assert path.is_relative_to(isolated_config)
    assert str(path) in where and "no keyring backend is available" in where
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert find_token(profile).value == TOKEN


def test_a_token_file_others_can_read_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "token", TOKEN)
    path.chmod(0o644)
    profile = Profile("lab", ("a:1",), token_file=path)
    with pytest.raises(CredentialError, match=r"group or others may read it \(mode 0644\)"):
        find_token(profile)
    path.chmod(0o600)
    assert find_token(profile).value == TOKEN


def test_no_token_anywhere_is_none() -> None:
    assert find_token(Profile("prod", ("a:1",))) is None


def test_link_security_reads_the_certificates(tmp_path: Path) -> None:
    ca, cert, key = (write(tmp_path / n, f"PEM {n}") for n in ("ca", "crt", "key"))
    profile = Profile("p", ("a:1",), (), ca, cert, key)
    security = link_security(profile, None)
    assert security == LinkSecurity(None, b"PEM ca", b"PEM key", b"PEM crt")
    assert "PEM" not in repr(security)
    with pytest.raises(CredentialError, match="cannot read the CA certificate"):
        link_security(Profile("p", ("a:1",), (), tmp_path / "missing"), None)


# -- gpufleet console login -----------------------------------------------------------


def login(monkeypatch, *args: str, token: str = TOKEN) -> int:
    monkeypatch.setattr("sys.stdin", io.StringIO(token + "\n"))
    return gpufleet(["console", "login", *args])


def test_login_creates_the_profile_and_keeps_the_token_out_of_it(
    tmp_path: Path, memory_keyring: MemoryKeyring, monkeypatch, capsys
) -> None:
    settings = tmp_path / "console.toml"
    ca = write(tmp_path / "ca.pem", "PEM")
    code = login(monkeypatch, "--config", str(settings), "--profile", "prod",
                 "--node", "gpu-01:50051", "--node", "gpu-02:50051", "--ca", str(ca))  # fmt: skip
    assert code == 0
    said = capsys.readouterr().out
    assert f"added profile 'prod' to {settings}" in said
    assert "the token of profile 'prod' is now in the system keyring" in said
    text = settings.read_text()
    assert TOKEN not in text and "s3cr3t" not in text
    assert memory_keyring.passwords[(SERVICE, "prod")] == TOKEN
    profile = load_settings(settings).profile()
    assert profile.nodes == ("gpu-01:50051", "gpu-02:50051") and profile.ca == ca
    # Logging in again (a new token) changes the keyring, not the file.
    assert login(monkeypatch, "--config", str(settings), token="gft_new") == 0
    assert memory_keyring.passwords[(SERVICE, "prod")] == "gft_new"
    assert settings.read_text() == text


def test_login_without_a_keyring_says_where_the_token_went(
    tmp_path: Path, isolated_config: Path, monkeypatch, capsys
) -> None:
    settings = write(tmp_path / "console.toml", SETTINGS)
    assert login(monkeypatch, "--config", str(settings), "--profile", "prod") == 0
    path = default_token_file("prod")
    assert f"is now in the token file {path} (mode 0600)" in capsys.readouterr().out
    assert path.read_text().strip() == TOKEN and oct(path.stat().st_mode & 0o777) == "0o600"
    assert settings.read_text() == SETTINGS


def test_login_to_an_unknown_profile_is_refused(tmp_path: Path, monkeypatch, capsys) -> None:
    settings = write(tmp_path / "console.toml", SETTINGS)
    assert login(monkeypatch, "--config", str(settings), "--profile", "prd") == 2
    error = capsys.readouterr().err
    assert "no profile 'prd'" in error and "--node" in error
    assert settings.read_text() == SETTINGS


def test_login_with_no_token_is_refused(tmp_path: Path, monkeypatch, capsys) -> None:
    settings = write(tmp_path / "console.toml", SETTINGS)
    assert login(monkeypatch, "--config", str(settings), token="   ") == 2
    assert "no token given" in capsys.readouterr().err
