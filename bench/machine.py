"""What the benchmarks ran on, and CPU / memory readings of processes and threads (Linux)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_PACKAGES = ("PySide6-Essentials", "pyqtgraph", "grpcio", "protobuf", "numpy", "gpufleet")


def describe_machine() -> dict[str, object]:
    """nproc, CPU model, memory, OS, Python and the versions of the packages that matter."""
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu_count": os.cpu_count(),
        "cpu_model": cpu_model(),
        "memory_gib": round(meminfo_kib("MemTotal") / 1024**2, 1),
        "kernel": platform.release(),
        "python": sys.version.split()[0],
        "qt": _qt_version(),
        "qpa_platform": os.environ.get("QT_QPA_PLATFORM", ""),
        "packages": {name: _package_version(name) for name in _PACKAGES},
    }


def run_header(argv: list[str]) -> dict[str, object]:
    """The head every benchmark's JSON result starts with: when, how it was called, where."""
    from datetime import UTC, datetime

    return {
        "when": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "argv": argv,
        "machine": describe_machine(),
    }


def code_version(root: Path) -> dict[str, object]:
    """The commit measured, and the files that differed from it (others may be editing)."""
    commit = _git(root, "rev-parse", "HEAD")
    return {"commit": commit.strip() if commit else None, "changed": _changed_files(root)}


def _changed_files(root: Path) -> list[str]:
    status = _git(root, "status", "--porcelain", "--", "console", "node_daemon", "protos")
    return [line[3:] for line in (status or "").splitlines()]


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def meminfo_kib(key: str) -> int:
    return _status_kib(Path("/proc/meminfo"), key)


def _package_version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def _qt_version() -> str | None:
    try:
        from PySide6.QtCore import qVersion
    except ImportError:
        return None
    return qVersion()


def _status_kib(path: Path, key: str) -> int:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1])
    raise KeyError(f"{key} not in {path}")


def rss_bytes(pid: int | str = "self") -> int:
    """Resident set size now (VmRSS)."""
    return _status_kib(Path(f"/proc/{pid}/status"), "VmRSS") * 1024


def peak_rss_bytes(pid: int | str = "self") -> int:
    """Largest resident set size so far (VmHWM)."""
    return _status_kib(Path(f"/proc/{pid}/status"), "VmHWM") * 1024


def _machine_cpu_ticks() -> list[int]:
    """/proc/stat's first line, every core together: user, nice, system, idle, iowait,
    irq, softirq, steal (clock ticks)."""
    fields = Path("/proc/stat").read_text(encoding="utf-8").splitlines()[0].split()[1:]
    return [int(f) for f in fields[:8]]


def system_busy_seconds() -> float:
    """CPU time all processes of the machine have used (every core), from /proc/stat."""
    user, nice, system, _idle, _iowait, irq, softirq, steal = _machine_cpu_ticks()
    return (user + nice + system + irq + softirq + steal) / CLOCK_TICKS


def system_steal_seconds() -> float:
    """CPU time the hypervisor gave to others while this VM wanted it (every core)."""
    return _machine_cpu_ticks()[7] / CLOCK_TICKS


def cpu_seconds(pid: int | str = "self", tid: int | None = None) -> float:
    """User + system CPU time of a process (all its threads) or of one of its threads."""
    path = Path(f"/proc/{pid}/stat") if tid is None else Path(f"/proc/{pid}/task/{tid}/stat")
    # The command name (field 2) may hold spaces; the fields after ')' are fixed.
    fields = path.read_text(encoding="utf-8").rpartition(")")[2].split()
    utime, stime = int(fields[11]), int(fields[12])
    return (utime + stime) / CLOCK_TICKS
