"""`gpufleet demo` and `gpufleet console` as a user runs them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

GPUFLEET = [sys.executable, "-m", "node_daemon"]


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    headless = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    return subprocess.run([*GPUFLEET, *args], capture_output=True, text=True, timeout=120,
                          env={**headless, **(env or {})})  # fmt: skip


@pytest.mark.parametrize("command", ["demo", "console"])
def test_without_display_says_so_and_offers_screenshot(command: str) -> None:
    result = run(command, "--node", "127.0.0.1:1") if command == "console" else run(command)
    assert result.returncode == 2
    assert "no display found" in result.stderr
    assert f"gpufleet {command} --screenshot out.png" in result.stderr


def test_console_without_nodes_explains(tmp_path: Path) -> None:
    settings = tmp_path / "console.toml"
    settings.write_text("nodes = []\n")
    result = run("console", "--config", str(settings), "--screenshot", str(tmp_path / "x.png"))
    assert result.returncode == 2 and "no nodes to watch" in result.stderr


@pytest.mark.slow
def test_demo_screenshot_shows_four_nodes_and_a_plot(tmp_path: Path) -> None:
    png = tmp_path / "demo.png"
    result = run("demo", "--screenshot", str(png))
    assert result.returncode == 0, result.stderr[-3000:]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "4/4 nodes connected, 32 GPU tiles" in result.stderr
    points = int(result.stderr.split(" plot points")[0].rsplit(" ", 1)[1])
    assert points >= 3
    # Closing the window stopped every daemon the demo started.
    pids = [int(p) for p in result.stderr.split("(pids ")[1].split(")")[0].split()]
    assert len(pids) == 4
    assert not [pid for pid in pids if Path(f"/proc/{pid}").exists()]


def test_console_uses_the_notify_settings_of_its_file(tmp_path: Path) -> None:
    settings = tmp_path / "console.toml"
    settings.write_text('nodes = ["127.0.0.1:1"]\n[notify]\nhold_s = 0\nbudget_per_hour = 3\n'
                        'popup = { xid = "critical" }\n')  # fmt: skip
    result = run("console", "--config", str(settings), "--screenshot", str(tmp_path / "x.png"),
                 env=NO_KEYRING)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "warnings after 0 s" in result.stderr and "at most 3 an hour" in result.stderr
    assert "xid (pops at critical)" in result.stderr


def test_a_screenshot_that_cannot_be_written_exits_1(tmp_path: Path) -> None:
    settings = tmp_path / "console.toml"
    settings.write_text('nodes = ["127.0.0.1:1"]\n')
    nowhere = tmp_path / "no-such-directory" / "x.png"
    result = run("console", "--config", str(settings), "--screenshot", str(nowhere),
                 env=NO_KEYRING)  # fmt: skip
    assert result.returncode == 1, result.stderr[-3000:]
    assert f"could not write screenshot {nowhere}" in result.stderr
    assert not nowhere.parent.exists()


def test_console_refuses_a_bad_notify_setting(tmp_path: Path) -> None:
    settings = tmp_path / "console.toml"
    settings.write_text('nodes = ["127.0.0.1:1"]\n[notify]\npopup = { throttle = "never" }\n')
    result = run("console", "--config", str(settings), "--screenshot", str(tmp_path / "x.png"),
                 env=NO_KEYRING)  # fmt: skip
    assert result.returncode == 2
    assert "notify.popup.throttle" in result.stderr and '"critical"' in result.stderr


# The subprocess must never see the user's real keyring.
NO_KEYRING = {"PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"}


def test_console_with_an_unknown_profile_explains(tmp_path: Path) -> None:
    settings = tmp_path / "console.toml"
    settings.write_text('profile = "prod"\n[profiles.prod]\nnodes = ["127.0.0.1:1"]\n')
    shot = str(tmp_path / "x.png")
    result = run("console", "--config", str(settings), "--profile", "lab", "--screenshot", shot,
                 env=NO_KEYRING)  # fmt: skip
    assert result.returncode == 2
    assert "no profile 'lab'" in result.stderr and "(profiles: prod)" in result.stderr


def test_console_refuses_a_token_file_others_can_read(tmp_path: Path) -> None:
    token = tmp_path / "prod.token"
    token.write_text("gft_secret\n")
    token.chmod(0o644)
    settings = tmp_path / "console.toml"
    settings.write_text(f'profile = "prod"\n[profiles.prod]\nnodes = ["127.0.0.1:1"]\n'
                        f'token_file = "{token}"\n')  # fmt: skip
    result = run("console", "--config", str(settings), "--screenshot", str(tmp_path / "x.png"),
                 env=NO_KEYRING)  # fmt: skip
    assert result.returncode == 2
    assert f"refusing the token file {token}: group or others may read it" in result.stderr
    assert f"chmod 600 {token}" in result.stderr and "gft_secret" not in result.stderr
