"""Forcing a pid to be reused, for real: root writes /proc/sys/kernel/ns_last_pid."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

NS_LAST_PID = Path("/proc/sys/kernel/ns_last_pid")
CAN_REUSE_PIDS = os.geteuid() == 0 and NS_LAST_PID.exists()
NO_PID_REUSE = "SKIPPED LOUDLY: forcing PID reuse needs root and /proc/sys/kernel/ns_last_pid"


def spawn_with_pid(
    pid: int, new_session: bool = False, attempts: int = 200
) -> subprocess.Popen[bytes]:
    """Root's own `sleep 300` (on no GPU) with exactly `pid`; other forks on the box may
    take it first, so it tries again. The pid must be free: reaped, and no longer any
    process group's or session's id."""
    for _ in range(attempts):
        NS_LAST_PID.write_text(str(pid - 1))
        candidate = subprocess.Popen(["sleep", "300"], start_new_session=new_session)
        if candidate.pid == pid:
            return candidate
        candidate.kill()
        candidate.wait()
    pytest.fail(f"could not get pid {pid} again in {attempts} attempts (a busy machine?)")


def group_gone(pgid: int) -> bool:
    """No process, not even a zombie, is left in the group (its id cannot be reused before)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False
