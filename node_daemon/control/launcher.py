"""Starting a workload's process, and finding out about it later (even after a restart)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from node_daemon.procinfo import PROC, process_start_time_unix_ms


@dataclass
class Launched:
    pid: int
    start_time_unix_ms: int | None
    popen: subprocess.Popen[bytes] | None  # None once re-adopted after a restart


class WorkloadFiles:
    """Where one workload keeps its output and its exit code."""

    def __init__(self, root: Path, workload_id: str) -> None:
        self.dir = root / workload_id
        self.output = self.dir / "output.log"
        self.exit_code = self.dir / "exit_code"

    def read_exit_code(self) -> int | None:
        try:
            return int(self.exit_code.read_text().strip())
        except (OSError, ValueError):
            return None


@dataclass(frozen=True)
class LaunchSpec:
    """What the runner needs to become the workload (sent on its stdin, never in argv)."""

    argv: Sequence[str]
    env: Mapping[str, str]  # the complete environment: nothing of the daemon's is added
    account: str | None  # the local account to become; None: the daemon's own (unprivileged)
    work_dir: str | None

    def to_json(self) -> bytes:
        return json.dumps(
            {"argv": list(self.argv), "env": dict(self.env), "account": self.account,
             "work_dir": self.work_dir}
        ).encode()  # fmt: skip


def launch(files: WorkloadFiles, spec: LaunchSpec) -> Launched:
    """Start the runner in its own session (process group); it becomes the workload."""
    files.dir.mkdir(parents=True, exist_ok=True)
    os.chmod(files.dir, 0o700)  # the workload's account must not reach its exit code
    command = [sys.executable, "-m", "node_daemon.control.runner", str(files.dir)]
    with open(files.output, "ab") as output:
        popen = subprocess.Popen(
            command, stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.PIPE,
            env=_runner_environment(), cwd=files.dir, start_new_session=True,
        )  # fmt: skip
    assert popen.stdin is not None
    with popen.stdin:
        popen.stdin.write(spec.to_json())
    return Launched(popen.pid, process_start_time_unix_ms(popen.pid), popen)


def _runner_environment() -> dict[str, str]:
    """Only what Python needs to find this package: the workload gets the spec's env."""
    keep = ("PATH", "PYTHONPATH", "LANG", "LC_ALL")
    return {k: v for k, v in os.environ.items() if k in keep}


def find_runner(files: WorkloadFiles, proc_root: Path = PROC) -> int | None:
    """The pid of a live runner of this workload, if one is running (after a crash mid-launch)."""
    wanted = [b"-m", b"node_daemon.control.runner", str(files.dir).encode()]
    for entry in proc_root.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if args[1:4] == wanted:
            return int(entry.name)
    return None


def still_running(launched: Launched, proc_root: Path = PROC) -> bool:
    if launched.popen is not None:
        return launched.popen.poll() is None
    started = process_start_time_unix_ms(launched.pid, proc_root)
    # A re-adopted runner is not our child: compare start times to be sure it is ours.
    return started is not None and (
        launched.start_time_unix_ms is None or abs(started - launched.start_time_unix_ms) <= 20
    )


def child_pid(pid: int, proc_root: Path = PROC) -> int | None:
    """The runner's child: the workload's own process (what shows up on the GPU)."""
    try:
        children = (proc_root / str(pid) / "task" / str(pid) / "children").read_text().split()
    except OSError:
        return None
    return int(children[0]) if children else None


def signal_group(pid: int, signum: int) -> bool:
    """Signal the workload's whole process group (the runner leads it).

    Never pid 0 or 1 (killpg(0) is the caller's own group) and never the
    daemon's own group, whatever a stored record says.
    """
    if pid <= 1 or pid == os.getpgrp():
        raise ValueError(f"refusing to signal process group {pid}: it is not a workload's")
    try:
        os.killpg(pid, signum)
    except ProcessLookupError:
        return False
    return True


TERM, KILL = signal.SIGTERM, signal.SIGKILL
