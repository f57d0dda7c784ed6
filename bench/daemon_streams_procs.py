"""The processes of bench/daemon_streams.py: the daemon, the subscribers, /proc readings."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from machine import CLOCK_TICKS, cpu_seconds, peak_rss_bytes, rss_bytes

SUBSCRIBERS = Path(__file__).resolve().with_name("daemon_streams_subscribers.py")
MIB = 1024**2


class BenchProcessError(RuntimeError):
    pass


def _log_tail(path: Path, lines: int = 20) -> str:
    text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
    return "\n".join(text.splitlines()[-lines:])


def _wait_for_file(
    path: Path, proc: subprocess.Popen[bytes], log: Path, timeout_s: float, what: str
) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists():
            return path.read_text(encoding="utf-8").strip()
        if proc.poll() is not None:
            raise BenchProcessError(f"{what} exited with {proc.returncode}:\n{_log_tail(log)}")
        time.sleep(0.05)  # a child's file: there is no event to wait on
    raise BenchProcessError(f"{what} not ready within {timeout_s:.0f} s:\n{_log_tail(log)}")


def _terminate(proc: subprocess.Popen[bytes] | None, timeout_s: float) -> None:
    """SIGTERM, wait, then SIGKILL if it will not go."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@dataclass(frozen=True)
class DaemonSpec:
    """How the daemon is started: backend, GPUs, tick, stream slots, environment."""

    backend: str
    gpus: int
    interval_s: float
    max_streams: int
    env: dict[str, str] | None = None


class DaemonProcess:
    """`python -m node_daemon daemon ...` as a child; a context manager that stops it."""

    def __init__(self, spec: DaemonSpec, workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self._spec, self._dir = spec, workdir
        self._ready = workdir / "ready"
        self._log = workdir / "daemon.log"
        self._proc: subprocess.Popen[bytes] | None = None

    def _argv(self) -> list[str]:
        config = self._dir / "daemon.toml"
        slots = self._spec.max_streams  # all subscribers share one address: per client too
        config.write_text(
            f"[daemon]\nmax_streams = {slots}\nmax_streams_per_client = {slots}\n", encoding="utf-8"
        )
        spec = self._spec
        return [
            sys.executable, "-m", "node_daemon", "daemon", "--backend", spec.backend,
            "--gpus", str(spec.gpus), "--interval", str(spec.interval_s),
            "--listen", "127.0.0.1:0", "--ready-file", str(self._ready),
            "--state-dir", str(self._dir / "state"), "--config", str(config),
        ]  # fmt: skip

    @property
    def pid(self) -> int:
        assert self._proc is not None, "start() first"
        return self._proc.pid

    def start(self, timeout_s: float = 60.0) -> str:
        """Start it; its HOST:PORT once it serves."""
        with self._log.open("wb") as log:
            self._proc = subprocess.Popen(
                self._argv(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=self._spec.env,
            )  # fmt: skip
        return _wait_for_file(self._ready, self._proc, self._log, timeout_s, "daemon")

    def log_tail(self) -> str:
        return _log_tail(self._log)

    def stop(self, timeout_s: float = 20.0) -> None:
        proc, self._proc = self._proc, None
        _terminate(proc, timeout_s)

    def __enter__(self) -> DaemonProcess:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()


class SubscriberProcess:
    """bench/daemon_streams_subscribers.py as a child; `stop()` returns what it received."""

    def __init__(self, workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self._ready = workdir / "subscribers.ready"
        self._stats = workdir / "subscribers.json"
        self._log = workdir / "subscribers.log"
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self._proc is not None, "start() first"
        return self._proc.pid

    def start(self, target: str, count: int, events: bool, timeout_s: float = 120.0) -> None:
        argv = [
            sys.executable, str(SUBSCRIBERS), "--target", target, "--count", str(count),
            "--ready-file", str(self._ready), "--stats-file", str(self._stats),
        ] + ([] if events else ["--no-events"])  # fmt: skip
        with self._log.open("wb") as log:
            # Our end of its stdin stays open while we live: it stops itself at EOF.
            self._proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT
            )
        _wait_for_file(self._ready, self._proc, self._log, timeout_s, "subscribers")

    def stop(self, timeout_s: float = 20.0) -> dict[str, object]:
        proc, self._proc = self._proc, None
        _terminate(proc, timeout_s)
        if proc is not None and proc.stdin is not None:
            proc.stdin.close()
        if not self._stats.exists():
            return {"subscribers": [], "error": _log_tail(self._log)}
        return dict(json.loads(self._stats.read_text(encoding="utf-8")))

    def __enter__(self) -> SubscriberProcess:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()


# ---------------------------------------------------------------- /proc readings


@dataclass(frozen=True)
class Reading:
    """A process's CPU seconds, and each thread's (tid -> (comm, seconds)), at `at`."""

    at: float
    cpu_s: float
    threads: dict[int, tuple[str, float]]


def thread_cpu(pid: int) -> dict[int, tuple[str, float]]:
    """tid -> (comm, seconds on a CPU) of every thread alive now.

    From /proc/PID/task/TID/schedstat (nanoseconds) where the kernel has it:
    /proc/.../stat counts in clock ticks (10 ms), too coarse for a hundred
    threads that each run a few microseconds a second.
    """
    found: dict[int, tuple[str, float]] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text(encoding="utf-8")
            seconds = _schedstat_seconds(task) or _stat_seconds(stat)
        except OSError:  # the thread ended
            continue
        found[int(task.name)] = (stat[stat.index("(") + 1 : stat.rindex(")")], seconds)
    return found


def _schedstat_seconds(task: Path) -> float | None:
    try:
        return int((task / "schedstat").read_text(encoding="utf-8").split()[0]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


def _stat_seconds(stat: str) -> float:
    fields = stat.rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def read_process(pid: int) -> Reading:
    return Reading(time.monotonic(), cpu_seconds(pid), thread_cpu(pid))


def memory_mib(pid: int) -> dict[str, float]:
    return {
        "rss": round(rss_bytes(pid) / MIB, 1),
        "peak": round(peak_rss_bytes(pid) / MIB, 1),
    }


_SERIAL = re.compile(r"[_-]\d+$")


def thread_group(tid: int, comm: str, names: dict[int, str]) -> str:
    """A Python thread's name without its serial number, else the OS thread name."""
    name = names.get(tid)
    if name is not None:
        return _SERIAL.sub("", name)
    return f"native: {comm}"


def cpu_pct_by_group(start: Reading, end: Reading, names: dict[int, str]) -> dict[str, float]:
    """Share of one core per thread group between two readings (threads alive at the end)."""
    wall = end.at - start.at
    groups: dict[str, float] = {}
    for tid, (comm, seconds) in end.threads.items():
        before = start.threads.get(tid, (comm, 0.0))[1]
        group = thread_group(tid, comm, names)
        groups[group] = groups.get(group, 0.0) + seconds - before
    return {group: round(100 * s / wall, 3) for group, s in sorted(groups.items())}
