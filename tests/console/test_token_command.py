"""token_command: a command that prints the profile's token, run for real, and refreshed.

Each test writes a real script (Python, run through its shebang without a
shell); the e2e tests run real daemons (plaintext and TLS) and the real window.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from console.connections.security import LinkSecurity
from console.credentials import CredentialError, find_token, link_security, store_token
from console.fleet.updates import LinkState
from console.main_window import MainWindow
from console.session import ConsoleSession
from console.settings import Profile, SettingsError, load_settings
from console.token_command import TokenCommandError, run_token_command
from gpufleet.policy import Role
from node_daemon.auth.settings import AuthSettings
from tests.console.conftest import MemoryKeyring
from tests.console.test_security_e2e import TOKENS, USERS, Pki, connected, pki, tls_daemon
from tests.own_processes import alive

__all__ = ["pki"]  # a fixture, used by name

BAD = "gft_" + "x" * 43  # a token no daemon knows


@pytest.fixture
def open_console(start_window) -> Callable[[str, LinkSecurity], MainWindow]:  # type: ignore[no-untyped-def]
    def open_(target: str, security: LinkSecurity) -> MainWindow:
        session = ConsoleSession([target], security=security, profile="prod")
        return start_window(session, show=False)

    return open_


def script(path: Path, body: str) -> Path:
    """An executable Python script (run by its shebang: no shell involved)."""
    path.write_text(f"#!{sys.executable}\nimport os, sys, time\n{body}\n", encoding="utf-8")
    path.chmod(0o700)
    return path


def tokens_in_turn(tmp_path: Path, *tokens: str) -> tuple[Path, Path]:
    """A command that prints the next token of `tokens` each time it runs (the last stays)."""
    calls = tmp_path / "calls"
    calls.write_text("0")
    command = script(tmp_path / "sso-helper", f"""
n = int(open({str(calls)!r}).read())
open({str(calls)!r}, "w").write(str(n + 1))
tokens = {list(tokens)!r}
token = tokens[min(n, len(tokens) - 1)]
print("sso-helper: handing out token", n + 1, "of", token, file=sys.stderr)
print(token)""")  # fmt: skip
    return command, calls


def profile_with(tmp_path: Path, command: str, nodes: str = "", extra: str = "") -> Profile:
    settings = tmp_path / "console.toml"
    settings.write_text(f'profile = "prod"\n[profiles.prod]\nnodes = [{nodes}]\n'
                        f"token_command = {command!r}\n{extra}")  # fmt: skip
    return load_settings(settings).profile()


# -- running the command ----------------------------------------------------------------


def test_the_token_is_what_the_command_prints_and_is_never_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    command, _ = tokens_in_turn(tmp_path, TOKENS["otto"])
    caplog.set_level(logging.INFO)
    assert run_token_command([str(command)], "prod") == TOKENS["otto"]
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "sso-helper: handing out token 1 of [token]" in logged  # its stderr, blanked
    assert TOKENS["otto"] not in logged


def test_the_command_learns_which_profile_asks(tmp_path: Path) -> None:
    command = script(tmp_path / "by-profile", 'print("gft_for_" + os.environ["GPUFLEET_PROFILE"])')
    assert run_token_command([str(command)], "lab") == "gft_for_lab"


def test_a_failing_command_says_why_in_its_own_words(tmp_path: Path) -> None:
    command = script(
        tmp_path / "sso", 'print("sso: not signed in; run sso login", file=sys.stderr)\nsys.exit(3)'
    )
    with pytest.raises(TokenCommandError) as raised:
        run_token_command([str(command)], "prod")
    assert str(raised.value) == (
        f"token_command {command} failed (exit status 3): sso: not signed in; run sso login"
    )


def test_a_hanging_command_is_stopped_with_everything_it_started(tmp_path: Path) -> None:
    child_pid = tmp_path / "child.pid"
    command = script(tmp_path / "hangs", f"""
import subprocess
child = subprocess.Popen(["sleep", "300"])
open({str(child_pid)!r}, "w").write(str(child.pid))
time.sleep(300)""")  # fmt: skip
    with pytest.raises(TokenCommandError) as raised:
        run_token_command([str(command)], "prod", timeout_s=2)
    assert str(raised.value) == f"token_command {command} gave no token within 2 s: stopped it"
    pid = int(child_pid.read_text())
    deadline = time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:  # a zombie until its reaper runs
        time.sleep(0.05)
    assert not alive(pid), "the command's own child outlived the timeout"


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("pass", "printed no token"),
        ('print("gft_a\\ngft_b")', "printed more than a token"),
    ],
)
def test_a_command_that_prints_no_single_token_is_refused(
    tmp_path: Path, body: str, said: str
) -> None:
    with pytest.raises(TokenCommandError, match=said):
        run_token_command([str(script(tmp_path / "odd", body))], "prod")


def test_a_missing_command_is_named(tmp_path: Path) -> None:
    with pytest.raises(TokenCommandError, match="token_command /nonexistent/sso: cannot run it"):
        run_token_command(["/nonexistent/sso"], "prod")


# -- the profile --------------------------------------------------------------------------


def test_token_command_is_split_like_a_shell_and_run_without_one(tmp_path: Path) -> None:
    profile = profile_with(tmp_path, "sso-token --audience 'gpu fleet' $HOME")
    assert profile.token_command == ("sso-token", "--audience", "gpu fleet", "$HOME")


def test_token_command_and_token_file_are_one_source_too_many(tmp_path: Path) -> None:
    with pytest.raises(
        SettingsError,
        match="token_file and token_command both say where the token comes from: keep one",
    ):
        profile_with(tmp_path, "sso-token", extra='token_file = "/etc/t"\n')
    with pytest.raises(SettingsError, match="token_command must be a command line"):
        profile_with(tmp_path, "   ")
    with pytest.raises(SettingsError, match="cannot be split"):
        profile_with(tmp_path, "sso-token 'unclosed")


def test_find_token_runs_the_command(tmp_path: Path) -> None:
    command, calls = tokens_in_turn(tmp_path, TOKENS["otto"])
    token = find_token(profile_with(tmp_path, str(command)))
    assert token is not None and token.value == TOKENS["otto"]
    assert token.source == f"the token command {command}" and calls.read_text() == "1"


def test_a_failing_command_stops_the_start_with_its_reason(tmp_path: Path) -> None:
    command = script(tmp_path / "sso", 'print("expired session", file=sys.stderr)\nsys.exit(1)')
    with pytest.raises(CredentialError, match="failed \\(exit status 1\\): expired session"):
        find_token(profile_with(tmp_path, str(command)))


def test_a_token_elsewhere_beside_the_command_is_refused(
    tmp_path: Path, memory_keyring: MemoryKeyring, monkeypatch: pytest.MonkeyPatch
) -> None:
    command, calls = tokens_in_turn(tmp_path, TOKENS["otto"])
    profile = profile_with(tmp_path, str(command))
    memory_keyring.passwords[("gpufleet", "prod")] = TOKENS["ada"]
    with pytest.raises(
        CredentialError, match="gets its token from token_command, but the system keyring"
    ):
        find_token(profile)
    memory_keyring.passwords.clear()
    monkeypatch.setenv("GPUFLEET_TOKEN", TOKENS["ada"])
    with pytest.raises(CredentialError, match="but \\$GPUFLEET_TOKEN holds one too"):
        find_token(profile)
    assert calls.read_text() == "0"  # refused before running anything
    with pytest.raises(CredentialError, match="gets its tokens from token_command"):
        store_token(profile, TOKENS["ada"])  # `gpufleet console login` has nothing to store


# -- refreshing, against real daemons -------------------------------------------------


def test_a_refused_token_is_fetched_again_and_the_node_connects_at_once(
    qtbot, open_console, start_daemon, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    daemon = start_daemon(gpus=2, auth=AuthSettings(USERS))
    target = f"127.0.0.1:{daemon.port}"
    command, calls = tokens_in_turn(tmp_path, BAD, TOKENS["otto"])
    profile = profile_with(tmp_path, str(command), nodes=f'"{target}"')
    caplog.set_level(logging.INFO)
    window = open_console(target, link_security(profile, find_token(profile)))
    node = connected(qtbot, window, target)  # within the 15 s wait: not after the 30 s backoff
    assert node.identity is not None and (node.identity.user, node.identity.role) == (
        "otto",
        Role.OPERATOR,
    )
    assert calls.read_text() == "2"  # once to start, once after the node said UNAUTHENTICATED
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert TOKENS["otto"] not in logged and BAD not in logged


@pytest.mark.parametrize("tls", [False, True], ids=["plaintext", "tls"])
def test_a_fresh_token_takes_effect_on_open_links_without_reconnecting(
    qtbot, open_console, start_daemon, pki: Pki, tmp_path: Path, tls: bool
) -> None:
    if tls:
        daemon = tls_daemon(start_daemon, pki)
        target, ca = f"localhost:{daemon.port}", f'ca = "{pki.ca_path}"\n'
    else:
        daemon = start_daemon(gpus=2, auth=AuthSettings(USERS))
        target, ca = f"127.0.0.1:{daemon.port}", ""
    command, calls = tokens_in_turn(tmp_path, TOKENS["otto"], TOKENS["ada"])
    profile = profile_with(tmp_path, str(command), nodes=f'"{target}"', extra=ca)
    window = open_console(target, link_security(profile, find_token(profile)))
    node = connected(qtbot, window, target)
    assert node.identity is not None and node.identity.user == "otto"
    received = node.samples_received
    window.session.connections.refresh_token("a test asks")
    qtbot.waitUntil(
        lambda: node.identity is not None and node.identity.user == "ada", timeout=15_000
    )
    assert node.state is LinkState.CONNECTED and calls.read_text() == "2"
    # The sample stream opened with otto's token kept flowing: no reconnect (no replay gap).
    qtbot.waitUntil(lambda: node.samples_received > received + 2, timeout=10_000)


def test_a_failing_refresh_says_why_in_the_message_line_and_keeps_the_token(
    qtbot, open_console, start_daemon, tmp_path: Path
) -> None:
    daemon = start_daemon(gpus=2, auth=AuthSettings(USERS))
    target = f"127.0.0.1:{daemon.port}"
    calls = tmp_path / "calls"
    calls.write_text("0")
    command = script(tmp_path / "sso-helper", f"""
n = int(open({str(calls)!r}).read())
open({str(calls)!r}, "w").write(str(n + 1))
if n:
    print("sso-helper: the identity provider is unreachable", file=sys.stderr)
    sys.exit(4)
print({BAD!r})""")  # fmt: skip
    profile = profile_with(tmp_path, str(command), nodes=f'"{target}"')
    window = open_console(target, link_security(profile, find_token(profile)))
    window.show()
    qtbot.waitUntil(lambda: "fresh token: failed" in window.statusBar().currentMessage(),
                    timeout=15_000)  # fmt: skip
    assert window.statusBar().currentMessage() == (
        f"fresh token: failed: token_command {command} failed (exit status 4): "
        "sso-helper: the identity provider is unreachable"
    )
    node = window.session.fleet.node(target)
    assert node.state is LinkState.DENIED and calls.read_text() == "2"
