"""The demo's workloads that outlived their node daemon, found by the demo's own directory.

A demo node ends its workloads when it stops (`gpufleet daemon --demo`). One that
could not (killed, crashed) leaves them running, reparented away from the demo.
Each workload runs under a runner, `python -m node_daemon.control.runner DIR`,
that leads its own process group, and DIR lies inside the demo's temporary
directory: that names them, and nothing else on the machine. Never a user or a
command name: another demo, a real daemon's workloads and the user's own
programs are left alone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from pathlib import Path

log = logging.getLogger(__name__)

PROC = Path("/proc")
RUNNER = [b"-m", b"node_daemon.control.runner"]


def runner_groups(demo_dir: Path, proc: Path = PROC) -> list[int]:
    """The process groups of runners whose workload directory lies in `demo_dir`."""
    inside = str(demo_dir.resolve()).encode() + b"/"
    groups = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[1:3] == RUNNER and len(argv) > 3 and argv[3].startswith(inside):
            with contextlib.suppress(OSError):
                groups.append(os.getpgid(int(entry.name)))
    return sorted(set(groups))


def end_leftovers(demo_dir: Path) -> list[int]:
    """KILL every process group of a runner of `demo_dir`; the groups ended."""
    ended = []
    for group in runner_groups(demo_dir):
        if group <= 1 or group == os.getpgrp():  # never ourselves, whatever /proc says
            continue
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)
            ended.append(group)
    if ended:
        log.warning("demo: ended workloads its nodes left running (process groups %s)", ended)
    return ended
