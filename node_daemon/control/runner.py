"""The launcher's stand-in parent of a workload: becomes its owner, runs it, records its exit.

`python -m node_daemon.control.runner WORKLOAD_DIR` reads the workload's spec
(JSON: argv, env, account, work_dir) from its standard input, so neither the
environment nor the command shows in `ps`. It forks; the child becomes the
account (initgroups, setgid, setuid; no capability survives), creates and
enters its working directory *as that account* (so a link planted there
cannot make root create anything), and execs the command with exactly the
environment of the spec. The runner itself stays with the daemon's
privileges: it passes TERM/INT on, and writes the exit code to
WORKLOAD_DIR/exit_code, where the workload cannot reach.

The daemon may be restarted meanwhile (systemd KillMode=process leaves this
process alone); the new daemon re-adopts the workload, finds this runner by
its WORKLOAD_DIR argument, and learns how it ended from exit_code.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import pwd
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import Any

# The child's exit status when it could not become the workload (no account,
# no working directory, no such command): the shell's "command not found".
CANNOT_START = 127
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 4


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m node_daemon.control.runner WORKLOAD_DIR < SPEC", file=sys.stderr)
        return 2
    exit_file = Path(argv[0]) / "exit_code"
    spec = json.load(sys.stdin)
    child = os.fork()
    if child == 0:
        _become_workload(spec)  # never returns
    forward = _forwarder(child)
    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    _, status = os.waitpid(child, 0)
    code = os.waitstatus_to_exitcode(status)
    _write_exit(exit_file, code)
    return code if code >= 0 else 128 - code


def _forwarder(child: int) -> Any:
    def forward(signum: int, _frame: FrameType | None) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signum)

    return forward


def _become_workload(spec: dict[str, Any]) -> None:
    """In the forked child: drop to the account, enter the work dir, exec. Exits on failure."""
    argv: list[str] = spec["argv"]
    try:
        os.close(0)
        os.open(os.devnull, os.O_RDONLY)  # stdin: nothing (the spec pipe is closed)
        account = spec.get("account")
        if account:
            _switch_user(account)
        _clear_ambient_capabilities()
        os.umask(0o022)
        work_dir = spec.get("work_dir")
        if work_dir:
            os.makedirs(work_dir, mode=0o700, exist_ok=True)
            os.chdir(work_dir)
    except OSError as exc:
        _fail(f"cannot become the workload's account or enter its working directory: {exc}")
    try:
        os.execvpe(argv[0], argv, spec["env"])
    except OSError as exc:
        _fail(f"cannot start {argv[0]}: {exc.strerror}")


def _switch_user(name: str) -> None:
    entry = pwd.getpwnam(name)
    if entry.pw_uid == 0:
        _fail("workloads never run as root")
    if os.geteuid() != entry.pw_uid:  # an unprivileged daemon runs its own account's only
        os.initgroups(name, entry.pw_gid)
        os.setgid(entry.pw_gid)
        os.setuid(entry.pw_uid)
    if os.getuid() != entry.pw_uid or os.geteuid() != entry.pw_uid:
        _fail(f"could not become {name}")


def _clear_ambient_capabilities() -> None:
    """A daemon given CAP_KILL or CAP_SETUID as ambient capabilities must not pass them on."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)  # fails only on old kernels


def _fail(message: str) -> None:
    os.write(2, f"gpufleet: {message}\n".encode(errors="replace"))
    os._exit(CANNOT_START)


def _write_exit(path: Path, code: int) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(f"{code}\n")
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
