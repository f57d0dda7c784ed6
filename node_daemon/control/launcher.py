"""Starting a workload's process, and finding out about it later (even after a restart)."""

from __future__ import annotations

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


def launch(
    files: WorkloadFiles, argv: Sequence[str], env: Mapping[str, str], gpu_uuids: Sequence[str]
) -> Launched:
    """Start ARGV under the runner, in its own session (process group), on these GPUs."""
    files.dir.mkdir(parents=True, exist_ok=True)
    full_env = {**os.environ, **env, "CUDA_VISIBLE_DEVICES": ",".join(gpu_uuids)}
    command = [
        sys.executable,
        "-m",
        "node_daemon.control.runner",
        str(files.exit_code),
        "--",
        *argv,
    ]
    with open(files.output, "ab") as output:
        popen = subprocess.Popen(
            command, stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=full_env, cwd=files.dir, start_new_session=True,
        )  # fmt: skip
    return Launched(popen.pid, process_start_time_unix_ms(popen.pid), popen)


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
    """Signal the workload's whole process group (the runner leads it)."""
    try:
        os.killpg(pid, signum)
    except ProcessLookupError:
        return False
    return True


TERM, KILL = signal.SIGTERM, signal.SIGKILL
