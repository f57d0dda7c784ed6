"""Which processes this test session started: the only ones its cleanup may end.

A uid proves nothing: in a container or chroot that shares the host's process
table, a test account's uid can be a host user's, and `pkill -u` ended every
process of that user. A process is this session's when

- it descends from this process (its parent chain in /proc reaches us), or
- it belongs to the session of a workload runner (node_daemon.control.runner:
  it leads its own session, and the workload runs in it) whose working
  directory is one of the session's own directories: a workload of a daemon
  the test stopped or killed, which the kernel reparented away from us.

It is ended through a pidfd opened before the check, so a pid reused between
the check and the signal is never signalled.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
RUNNER_ARGV = [b"-m", b"node_daemon.control.runner"]


@dataclass(frozen=True)
class Seen:
    """One process as /proc shows it now."""

    pid: int
    ppid: int
    session: int
    state: str
    uids: tuple[int, ...]  # real, effective, saved, filesystem


def seen(pid: int) -> Seen | None:
    """`pid` now; None once it has gone."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
        status = (PROC / str(pid) / "status").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # the command may hold spaces and ')'
    uid_line = next(line for line in status.splitlines() if line.startswith("Uid:"))
    uids = tuple(int(u) for u in uid_line.split()[1:])
    return Seen(pid, int(fields[1]), int(fields[3]), fields[0], uids)


def alive(pid: int) -> bool:
    """`pid` runs: it exists and is no zombie (nor dying)."""
    process = seen(pid)
    return process is not None and process.state not in "ZX"


def processes_of(uid: int) -> list[Seen]:
    """Every process that runs as `uid` (real, effective or saved), zombies included."""
    found = []
    for entry in PROC.iterdir():
        process = seen(int(entry.name)) if entry.name.isdigit() else None
        if process is not None and uid in process.uids[:3]:
            found.append(process)
    return found


def descends_from_us(pid: int) -> bool:
    """Whether this process is among `pid`'s ancestors."""
    us = os.getpid()
    current = seen(pid)
    for _ in range(4096):  # a chain longer than any pid_max allows cannot be real
        if current is None or current.ppid <= 1:
            return False
        if current.ppid == us:
            return True
        current = seen(current.ppid)
    return False


def in_own_workload(pid: int, own_dirs: Sequence[Path]) -> bool:
    """Whether `pid` runs in the session of a workload runner working in one of `own_dirs`."""
    process = seen(pid)
    if process is None or process.session <= 1:
        return False
    leader = PROC / str(process.session)
    try:
        argv = (leader / "cmdline").read_bytes().split(b"\0")
        where = Path(os.readlink(leader / "cwd"))
        same = os.path.samestat(os.stat(leader / "cwd"), os.stat(where))
    except OSError:
        return False  # the runner has gone, or the directory is not ours to see
    inside = any(where.is_relative_to(d.resolve()) for d in own_dirs)
    return argv[1:3] == RUNNER_ARGV and same and inside


def ours(pid: int, own_dirs: Sequence[Path]) -> bool:
    """Whether this test session started `pid` (module docstring)."""
    return descends_from_us(pid) or in_own_workload(pid, own_dirs)


def end_own(uid: int, own_dirs: Sequence[Path], timeout_s: float = 10.0) -> list[int]:
    """SIGKILL this session's processes running as `uid`, and wait until they have gone.

    Returns their pids. Whatever else runs as `uid` is left alone.
    """
    ended = []
    for process in processes_of(uid):
        with _pidfd(process.pid) as fd:
            if fd is not None and process.state not in "ZX" and ours(process.pid, own_dirs):
                signal.pidfd_send_signal(fd, signal.SIGKILL)
                select.select([fd], [], [], timeout_s)  # readable once it has exited
                ended.append(process.pid)
    deadline = time.monotonic() + timeout_s
    for pid in ended:
        _reap_if_ours(pid)
        while seen(pid) is not None and time.monotonic() < deadline:
            time.sleep(0.02)  # its parent (a runner, init) reaps it; nothing to wait on
            _reap_if_ours(pid)
    return ended


@contextlib.contextmanager
def _pidfd(pid: int) -> Iterator[int | None]:
    try:
        fd = os.pidfd_open(pid)
    except OSError:  # gone already
        yield None
        return
    try:
        yield fd
    finally:
        os.close(fd)


def _reap_if_ours(pid: int) -> None:
    """Reap `pid` if it is this process's own child (a zombie here would keep the uid busy)."""
    process = seen(pid)
    if process is not None and process.ppid == os.getpid():
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
