"""SIGTERM stops the daemon whichever of its threads the kernel hands the signal to."""

from __future__ import annotations

import ctypes
import os
import signal
from pathlib import Path

import pytest

from tests.daemon_process import DaemonProcess

# tgkill(2): a signal for one thread of a process, as the kernel may pick any.
SYS_TGKILL = {"x86_64": 234, "aarch64": 131}.get(os.uname().machine)


def tgkill(pid: int, tid: int, signum: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(SYS_TGKILL, pid, tid, signum) != 0:
        raise OSError(ctypes.get_errno(), "tgkill failed")


@pytest.mark.skipif(SYS_TGKILL is None, reason=f"no tgkill number for {os.uname().machine}")
def test_sigterm_taken_by_a_worker_thread_stops_the_daemon(tmp_path: Path) -> None:
    daemon = DaemonProcess(tmp_path, "--backend", "simulated", "--gpus", "1").start()
    assert daemon.proc is not None
    pid = daemon.proc.pid
    workers = sorted(int(t) for t in os.listdir(f"/proc/{pid}/task") if int(t) != pid)
    assert workers, "the daemon should have threads besides the main one"
    try:
        tgkill(pid, workers[-1], signal.SIGTERM)
        assert daemon.proc.wait(30) == 0
        assert "received SIGTERM" in daemon.log.read_text()
    finally:
        if daemon.proc.poll() is None:
            daemon.kill(signal.SIGKILL)
