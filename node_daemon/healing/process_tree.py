"""A process's ancestors, read from /proc: whose child a GPU process is."""

from __future__ import annotations

from pathlib import Path

from node_daemon.backends.procinfo import PROC

MAX_DEPTH = 64


def parent_pid(pid: int, proc_root: Path = PROC) -> int | None:
    try:
        stat = (proc_root / str(pid) / "stat").read_text()
    except OSError:
        return None
    # Field 4, after the command in parentheses (which may itself hold spaces and ')').
    fields = stat[stat.rfind(")") + 2 :].split()
    return int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else None


def ancestors(pid: int, proc_root: Path = PROC) -> list[int]:
    """Parent, grandparent, ... up to (not including) pid 1; [] for a process gone."""
    found: list[int] = []
    current = parent_pid(pid, proc_root)
    while current is not None and current > 1 and len(found) < MAX_DEPTH:
        found.append(current)
        current = parent_pid(current, proc_root)
    return found
