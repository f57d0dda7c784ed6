"""Starting a workload's process, and finding out about it later (even after a restart).

Two ways to start one, behind one interface (`Launcher`), chosen at start-up
(node_daemon.control.launcher_choice):

- `DirectLauncher`: the daemon starts node_daemon.control.runner as its own
  child, which becomes the owner's account (setuid/setgid/initgroups). Needs a
  daemon that may switch users (root, or CAP_SETUID and CAP_SETGID); the
  workload inherits the daemon's sandbox. For containers and CI, where systemd
  is not PID 1.
- `SystemdLauncher` (node_daemon.control.systemd_launcher): systemd starts each
  workload as a transient service of its own, as its owner, outside the
  daemon's sandbox. For servers, where the daemon runs unprivileged under
  installer/systemd/gpufleet-daemon.service.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from node_daemon.backends.procinfo import (
    PROC,
    ProcessIdentity,
    process_argv,
    process_identity,
    process_start_time_unix_ms,
)
from node_daemon.control.accounts import daemon_may_switch_users

log = logging.getLogger(__name__)
# How far two start times of one process may differ: both round to a clock tick.
START_SLACK_MS = 20
# How long a runner whose start could not be recorded gets to die after KILL.
REAP_TIMEOUT_S = 10.0
# Every runner this process started and has not reaped yet. A workload outlives
# the WorkloadManager that started it (by design: a stopped daemon leaves its
# workloads running, and in-process daemons stop without the process ending);
# a Popen collected while its child runs would leave the child unreaped. Kept
# here, each is reaped by release() or, once it has ended, by the next launch.
_UNREAPED: list[subprocess.Popen[bytes]] = []


@dataclass
class Launched:
    """A started workload: its main process, and what the launcher knows it by."""

    pid: int  # the runner (direct), or the unit's main process (systemd); 0: none known
    start_time_unix_ms: int | None
    popen: subprocess.Popen[bytes] | None = None  # None once re-adopted after a restart
    unit: str = ""  # the transient systemd unit that holds it (systemd launcher only)
    identity: ProcessIdentity | None = None  # pid's boot and start tick, as started

    @classmethod
    def of(cls, pid: int, popen: subprocess.Popen[bytes] | None = None, unit: str = "") -> Launched:
        """`pid` as it is now: its start time and identity read from /proc (none for 0)."""
        if pid <= 0:
            return cls(pid, None, popen, unit)
        return cls(pid, process_start_time_unix_ms(pid), popen, unit, process_identity(pid))

    def is_running(self, proc_root: Path = PROC) -> bool:
        """Its pid still names the process it was started as (not one that reuses the pid).

        By identity when it is known; else (a record from before identities were
        kept) by start time, to the 10 ms a clock tick rounds to.
        """
        if self.pid <= 1:
            return False
        if self.identity is not None:
            return process_identity(self.pid, proc_root) == self.identity
        started = process_start_time_unix_ms(self.pid, proc_root)
        return (
            started is not None
            and self.start_time_unix_ms is not None
            and abs(started - self.start_time_unix_ms) <= START_SLACK_MS
        )


class WorkloadFiles:
    """Where one workload keeps its output and its exit code."""

    def __init__(self, root: Path, workload_id: str) -> None:
        self.workload_id = workload_id
        self.dir = root / workload_id
        self.output = self.dir / "output.log"
        self.exit_code = self.dir / "exit_code"
        self.identity = self.dir / "process"  # the started process's ProcessIdentity

    def read_exit_code(self) -> int | None:
        try:
            return int(self.exit_code.read_text().strip())
        except (OSError, ValueError):
            return None

    def keep_identity(self, identity: ProcessIdentity | None) -> None:
        """Remember which process was started, for a daemon that restarts to adopt it.

        Not kept (a full disk): a restart compares start times instead, as it did
        before identities were kept.
        """
        if identity is None:
            return
        try:
            self.identity.write_text(identity.to_text())
        except OSError as exc:
            log.warning("workload %s: cannot keep its process identity: %s", self.workload_id, exc)

    def kept_identity(self) -> ProcessIdentity | None:
        try:
            return ProcessIdentity.from_text(self.identity.read_text())
        except OSError:
            return None

    def prepare(self) -> None:
        """The workload's private directory and its (daemon-owned) output file."""
        self.dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir, 0o700)  # the workload's account must not reach its exit code
        with open(self.output, "ab"):
            pass


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


class Launcher(Protocol):
    """Starts workloads and answers for them until their end is recorded.

    Every method but `launch` may be called by a daemon that did not start the
    workload (after a restart): what it needs is in `Launched` and the files.
    """

    name: str

    @property
    def switches_users(self) -> bool:
        """Whether workloads may run as accounts other than the daemon's own."""
        ...

    def check_environment(self, env: Mapping[str, str]) -> None:
        """ValueError saying why this launcher cannot pass `env` on exactly."""
        ...

    def launch(self, files: WorkloadFiles, spec: LaunchSpec) -> Launched:
        """Start the workload; OSError or ValueError when it did not start (nothing runs)."""
        ...

    def find(self, files: WorkloadFiles) -> Launched | None:
        """The workload if it was started, after a crash between intent and commit."""
        ...

    def adopt(self, files: WorkloadFiles, pid: int, start_time_unix_ms: int) -> Launched | None:
        """A workload recorded as running (pid and start time), after a daemon restart."""
        ...

    def still_running(self, launched: Launched) -> bool: ...

    def signal(self, launched: Launched, signum: int) -> bool:
        """Signal every process of the workload; False if none was left to signal."""
        ...

    def exit_code(self, files: WorkloadFiles, launched: Launched | None) -> int | None:
        """How it ended (negative: killed by that signal); None when not known."""
        ...

    def workload_pid(self, launched: Launched) -> int | None:
        """The workload's own process: the one that shows up on its GPUs."""
        ...

    def release(self, launched: Launched) -> None:
        """Forget it once its end is recorded (reap it, remove its unit)."""
        ...


class DirectLauncher:
    """The daemon's own child, node_daemon.control.runner, becomes the workload."""

    name = "direct"

    @property
    def switches_users(self) -> bool:
        return daemon_may_switch_users()

    def check_environment(self, env: Mapping[str, str]) -> None:
        """execve passes any name without '=' on (limits.check_command checks those)."""

    def launch(self, files: WorkloadFiles, spec: LaunchSpec) -> Launched:
        return launch(files, spec)

    def find(self, files: WorkloadFiles) -> Launched | None:
        runner = find_runner(files)
        if runner is not None:
            return Launched.of(runner)
        if files.read_exit_code() is not None:  # it ran, and ended before the restart
            return Launched(0, None)
        return None

    def adopt(self, files: WorkloadFiles, pid: int, start_time_unix_ms: int) -> Launched | None:
        if pid <= 1:
            return None
        identity = files.kept_identity()
        if identity is None and (args := process_argv(pid)) is not None:
            # Started before identities were kept, so its recorded start time may have
            # moved with the clock; but only this workload's runner has its directory
            # in argv, and the recorded pid is always the runner.
            if not is_runner(files, args):
                return None  # the pid is another process's now
            identity = process_identity(pid)
            files.keep_identity(identity)
        return Launched(pid, start_time_unix_ms, identity=identity)

    def still_running(self, launched: Launched) -> bool:
        return still_running(launched)

    def signal(self, launched: Launched, signum: int) -> bool:
        return signal_group(launched.pid, signum)

    def exit_code(self, files: WorkloadFiles, launched: Launched | None) -> int | None:
        code = files.read_exit_code()
        if code is None and launched is not None and launched.popen is not None:
            code = launched.popen.returncode
        return code

    def workload_pid(self, launched: Launched) -> int | None:
        return child_pid(launched.pid)

    def release(self, launched: Launched) -> None:
        if launched.popen is None:
            return
        try:
            launched.popen.wait(REAP_TIMEOUT_S)
        except subprocess.TimeoutExpired:  # a zombie is reaped by the next poll
            log.warning("runner %d did not exit after KILL", launched.pid)
        else:
            _reap_ended()


def _reap_ended() -> None:
    _UNREAPED[:] = [popen for popen in _UNREAPED if popen.poll() is None]


def launch(files: WorkloadFiles, spec: LaunchSpec) -> Launched:
    """Start the runner in its own session (process group); it becomes the workload."""
    _reap_ended()
    files.prepare()
    command = [sys.executable, "-m", "node_daemon.control.runner", str(files.dir)]
    with open(files.output, "ab") as output:
        popen = subprocess.Popen(
            command, stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.PIPE,
            env=_runner_environment(), cwd=files.dir, start_new_session=True,
        )  # fmt: skip
    _UNREAPED.append(popen)
    assert popen.stdin is not None
    with popen.stdin:
        popen.stdin.write(spec.to_json())
    return Launched.of(popen.pid, popen)


def _runner_environment() -> dict[str, str]:
    """Only what Python needs to find this package: the workload gets the spec's env."""
    keep = ("PATH", "PYTHONPATH", "LANG", "LC_ALL")
    return {k: v for k, v in os.environ.items() if k in keep}


def find_runner(files: WorkloadFiles, proc_root: Path = PROC) -> int | None:
    """The pid of a live runner of this workload, if one is running (after a crash mid-launch)."""
    for entry in proc_root.iterdir():
        if not entry.name.isdigit():
            continue
        args = process_argv(int(entry.name), proc_root)
        if args is not None and is_runner(files, args):
            return int(entry.name)
    return None


def is_runner(files: WorkloadFiles, args: Sequence[bytes]) -> bool:
    """Whether argv is this workload's runner: `python -m node_daemon.control.runner DIR`."""
    return list(args[1:4]) == [b"-m", b"node_daemon.control.runner", str(files.dir).encode()]


def still_running(launched: Launched, proc_root: Path = PROC) -> bool:
    if launched.popen is not None:
        return launched.popen.poll() is None
    return launched.is_running(proc_root)  # a re-adopted runner is not our child


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
