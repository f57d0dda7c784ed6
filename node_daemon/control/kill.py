"""Killing a process safely: the right one, politely first, and never a stranger.

The caller names the process by pid *and* start time. A pidfd pins the process
before its start time is checked, so a pid reused in between cannot be hit.
TERM first, KILL after the grace period; a process already gone is success; one
that survives KILL (stuck in the driver) is reported, not retried.
"""

from __future__ import annotations

import enum
import logging
import os
import select
import signal
import time
from pathlib import Path

from node_daemon.backends.procinfo import PROC, process_start_time_unix_ms
from node_daemon.errors import Forbidden

log = logging.getLogger(__name__)

KILL_WAIT_S = 5.0
# Start times are computed from clock ticks (10 ms) the same way each time.
START_TOLERANCE_MS = 20


class KillOutcome(enum.Enum):
    TERMINATED = "terminated"
    KILLED = "killed"
    ALREADY_GONE = "already gone"
    UNKILLABLE = "unkillable"


class PidReused(Exception):
    """The pid now belongs to another process than the one the caller saw."""


def kill_process(
    pid: int, start_time_unix_ms: int, grace_s: float, proc_root: Path = PROC
) -> KillOutcome:
    """TERM, wait up to grace_s, KILL, wait; raises PidReused for a different process."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return KillOutcome.ALREADY_GONE
    try:
        _check_identity(pid, start_time_unix_ms, proc_root)
        return _terminate(pidfd, grace_s)
    finally:
        os.close(pidfd)


def _check_identity(pid: int, start_time_unix_ms: int, proc_root: Path) -> None:
    actual = process_start_time_unix_ms(pid, proc_root)
    if actual is not None and abs(actual - start_time_unix_ms) > START_TOLERANCE_MS:
        raise PidReused(
            f"pid {pid} started at {clock_text(actual)}, not {clock_text(start_time_unix_ms)}: "
            "it is a different process now; nothing was signalled"
        )


def _terminate(pidfd: int, grace_s: float) -> KillOutcome:
    if not _signal(pidfd, signal.SIGTERM):
        return KillOutcome.ALREADY_GONE
    if _exited_within(pidfd, grace_s):
        return KillOutcome.TERMINATED
    if not _signal(pidfd, signal.SIGKILL):
        return KillOutcome.TERMINATED
    return KillOutcome.KILLED if _exited_within(pidfd, KILL_WAIT_S) else KillOutcome.UNKILLABLE


def _signal(pidfd: int, signum: int) -> bool:
    try:
        signal.pidfd_send_signal(pidfd, signum)
    except ProcessLookupError:
        return False
    except PermissionError:
        raise Forbidden(
            "the daemon may not signal this process (another user's): it needs CAP_KILL; "
            'see "Killing other users\' processes" in docs/operations.md'
        ) from None
    return True


def _exited_within(pidfd: int, timeout_s: float) -> bool:
    """A pidfd becomes readable when its process exits."""
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return bool(poller.poll(max(0.0, timeout_s) * 1000))


def clock_text(unix_ms: int | None) -> str:
    """A start time as people read it, to the millisecond (start times differ by that)."""
    if unix_ms is None:
        return "an unknown time"
    seconds = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(unix_ms / 1000))
    return f"{seconds}.{unix_ms % 1000:03d}"
