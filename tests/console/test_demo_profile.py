"""The profile file `gpufleet demo` writes: used while its demo runs, refused once it has not.

Every console test has its own config directory (conftest's isolated_config).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from console.demo_profile import (
    demo_profile_path,
    process_start_ticks,
    remove_demo_profile,
    write_demo_profile,
)
from console.settings import SettingsError, load_settings

NODES = ["127.0.0.1:40001", "127.0.0.1:40002"]


def ended_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    return int(done.stdout)


def written_by(pid: int, start: int) -> Path:
    """The demo's profile as a demo with `pid` (started at `start` ticks) wrote it."""
    path = write_demo_profile(NODES, Path("/nonexistent/token"), ["alice"])
    text = path.read_text().replace(f"demo_pid = {os.getpid()}", f"demo_pid = {pid}")
    text = text.replace(f"demo_pid_start = {process_start_ticks(os.getpid())}",
                        f"demo_pid_start = {start}")  # fmt: skip
    path.write_text(text)
    return path


def test_a_running_demos_profile_is_the_profile_demo() -> None:
    write_demo_profile(NODES, Path("/tmp/token"), ["alice", "team:ml"])
    profile = load_settings().profile("demo")
    assert profile.nodes == tuple(NODES) and profile.token_file == Path("/tmp/token")
    assert profile.people == ("alice", "team:ml")


def test_an_ended_demos_profile_is_refused_with_what_to_do() -> None:
    written_by(ended_pid(), 12345)
    settings = load_settings()  # the settings still load: only that profile is refused
    with pytest.raises(SettingsError, match=r"has ended.*gpufleet demo"):
        settings.profile("demo")


def test_a_reused_pid_is_not_the_demo(isolated_config: Path) -> None:
    """Our own pid, alive, but started at another time than the demo that wrote it."""
    written_by(os.getpid(), (process_start_ticks(os.getpid()) or 0) + 1)
    with pytest.raises(SettingsError, match="has ended"):
        load_settings().profile("demo")


@pytest.mark.parametrize(
    "text",
    [b"not toml [[[", b"demo_pid = 'x'\ndemo_pid_start = 1\n[profiles.demo]\nnodes = []\n",
     b"demo_pid = 1\n", b"\xff\xfe not UTF-8",
     b"demo_pid = 1\ndemo_pid_start = 1\ntoken = 'gft_x'\n[profiles.demo]\nnodes = []\n"],
)  # fmt: skip
def test_a_damaged_profile_is_refused_and_the_others_still_work(
    isolated_config: Path, text: bytes
) -> None:
    isolated_config.mkdir(parents=True, exist_ok=True)
    (isolated_config / "console.toml").write_text('[profiles.prod]\nnodes = ["gpu-1:50051"]\n')
    demo_profile_path().write_bytes(text)
    settings = load_settings()
    assert settings.profile("prod").nodes == ("gpu-1:50051",)
    with pytest.raises(SettingsError, match="remove it"):
        settings.profile("demo")


def test_a_bad_node_in_a_live_demos_profile_is_refused() -> None:
    path = write_demo_profile(["no-port"], Path("/tmp/token"), [])
    with pytest.raises(SettingsError, match=r"HOST:PORT.*remove it"):
        load_settings().profile("demo")
    assert path.exists()


def test_the_users_own_demo_profile_wins(isolated_config: Path) -> None:
    isolated_config.mkdir(parents=True, exist_ok=True)
    (isolated_config / "console.toml").write_text('[profiles.demo]\nnodes = ["mine:50051"]\n')
    write_demo_profile(NODES, Path("/tmp/token"), [])
    assert load_settings().profile("demo").nodes == ("mine:50051",)


def test_only_the_demo_that_wrote_it_removes_it() -> None:
    path = written_by(ended_pid(), 1)  # a later demo's, say
    assert not remove_demo_profile(path)
    assert path.exists()
    path = write_demo_profile(NODES, Path("/tmp/token"), [])
    assert remove_demo_profile(path)
    assert not path.exists()
    with pytest.raises(SettingsError, match="gpufleet demo"):
        load_settings().profile("demo")
