"""The profile `gpufleet demo` writes while it runs, so the terminal commands find its nodes.

    # ~/.config/gpufleet/demo-profile.toml
    demo_pid = 4242                 # the demo's process ...
    demo_pid_start = 123456789      # ... and its start (clock ticks since boot)
    [profiles.demo]
    nodes = ["127.0.0.1:40123", ...]
    token_file = "/tmp/gpufleet-demo-x1y2/token"
    people = ["alice", "bob", "carol", "team:ml"]

A file of its own beside console.toml, never an edit of the user's settings:
the demo's ports are random and its token dies with it, and the user's file
(and its comments) stays theirs. The settings read it as the profile `demo`
unless console.toml has a `demo` profile of its own (that one wins).

The demo removes it when it ends. A demo that could not (killed by SIGKILL, a
crash) leaves it behind: its process is gone, or its pid is another process's
now, so the profile is refused with what happened and what to do, and no
command talks to dead ports or to whoever has taken them since.
"""

from __future__ import annotations

import contextlib
import json
import os
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import platformdirs

DEMO_PROFILE = "demo"
FILE_NAME = "demo-profile.toml"
_KEYS = {"demo_pid", "demo_pid_start", "profiles"}


@dataclass(frozen=True)
class DemoProfile:
    """The demo's profile as found: its table for the settings, or why it cannot be used."""

    path: Path
    table: dict[str, object] | None  # the [profiles.demo] table, when the demo runs
    unusable: str = ""  # why not, in words, when it does not


def demo_profile_path() -> Path:
    return Path(platformdirs.user_config_dir("gpufleet")) / FILE_NAME


def write_demo_profile(nodes: Sequence[str], token_file: Path, people: Sequence[str]) -> Path:
    """Write the running demo's profile (this process's), atomically; its path."""
    path = demo_profile_path()
    pid = os.getpid()
    lines = [
        "# Written by `gpufleet demo` while it runs; removed when it ends.",
        "# Its nodes for the terminal commands: gpufleet status --profile demo",
        f"demo_pid = {pid}",
        f"demo_pid_start = {process_start_ticks(pid) or 0}",
        "",
        f"[profiles.{DEMO_PROFILE}]",
        f"nodes = {_strings(nodes)}",
        f"token_file = {json.dumps(str(token_file))}",
        f"people = {_strings(people)}",
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{pid}.tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def remove_demo_profile(path: Path) -> bool:
    """Remove the profile at `path` if this process wrote it (a later demo's is left alone)."""
    if _writer(path) != os.getpid():
        return False
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    return True


def read_demo_profile(path: Path | None = None) -> DemoProfile | None:
    """The demo's profile at `path` (default: beside console.toml); None when there is none."""
    path = path or demo_profile_path()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return DemoProfile(path, None, _damaged(path, str(exc)))
    table = data.get("profiles", {}).get(DEMO_PROFILE) if isinstance(data, dict) else None
    pid, start = data.get("demo_pid"), data.get("demo_pid_start")
    if set(data) - _KEYS or not isinstance(table, dict) or not _whole(pid) or not _whole(start):
        return DemoProfile(path, None, _damaged(path, "not the file a demo writes"))
    assert isinstance(pid, int) and isinstance(start, int)  # _whole
    if not _running(pid, start):
        return DemoProfile(
            path, None,
            f"the demo that wrote the profile {DEMO_PROFILE!r} ({path}, pid {pid}) has ended, "
            "so its nodes are gone: start it again with `gpufleet demo`, or remove the file",
        )  # fmt: skip
    return DemoProfile(path, table)


def process_start_ticks(pid: int) -> int | None:
    """When `pid` started (clock ticks since boot, /proc/PID/stat field 22); None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2 :].split()[19])


def _running(pid: int, start: int) -> bool:
    """The demo's process still runs: its pid alive and, where /proc tells, started then."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, another user's: the start time says whether it is the demo
    now = process_start_ticks(pid)
    return now is None or start == 0 or now == start


def _writer(path: Path) -> int | None:
    try:
        pid = tomllib.loads(path.read_text(encoding="utf-8")).get("demo_pid")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    return pid if _whole(pid) else None


def _damaged(path: Path, why: str) -> str:
    return (f"the demo's profile {path} cannot be read ({why}): remove it, or start "
            "`gpufleet demo` again, which writes it anew")  # fmt: skip


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _strings(values: Sequence[str]) -> str:
    return "[" + ", ".join(json.dumps(v) for v in values) + "]"
