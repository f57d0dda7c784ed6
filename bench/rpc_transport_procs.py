"""Parts of the RPC transport benchmarks: code trees, daemons started from them, readings.

`hostile_memory.py`, `stream_starvation.py` and `silent_node.py` measure this
checkout and, with ``--baseline DIR``, an earlier one beside it in the same run
(a ``git worktree`` of the commit before a fix, say), so before/after are
ratios on one machine at one time. A tree's code is put first on
``PYTHONPATH`` of every process started for it (daemon, subscribers, probe);
the generated protobuf modules come from the tree's ``protos/``.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent


class BenchProcessError(RuntimeError):
    pass


@dataclass(frozen=True)
class Tree:
    """A checkout of the project: this one ("after") or a baseline ("before")."""

    label: str
    path: Path

    def env(self) -> dict[str, str]:
        paths = [str(self.path), str(self.path / "protos"), os.environ.get("PYTHONPATH", "")]
        return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in paths if p))

    def has_config_key(self, key: str) -> bool:
        """Whether this tree's daemon knows a config key (an older one refuses new keys)."""
        config = self.path / "node_daemon" / "config.py"
        return f'"{key}"' in config.read_text(encoding="utf-8")

    def commit(self) -> str:
        found = subprocess.run(
            ["git", "-C", str(self.path), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        dirty = subprocess.run(
            ["git", "-C", str(self.path), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        return found.stdout.strip() + (" (modified)" if dirty.stdout.strip() else "")


def trees(baseline: Path | None) -> list[Tree]:
    """The baseline first (when given), then this checkout."""
    found = [Tree("before", baseline.resolve())] if baseline is not None else []
    return [*found, Tree("after", ROOT)]


def _log_tail(path: Path, lines: int = 20) -> str:
    text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
    return "\n".join(text.splitlines()[-lines:])


def wait_for_file(path: Path, proc: subprocess.Popen[bytes], log: Path, timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_text(encoding="utf-8").strip():
            return path.read_text(encoding="utf-8").strip()
        if proc.poll() is not None:
            raise BenchProcessError(f"{proc.args!r} exited {proc.returncode}:\n{_log_tail(log)}")
        time.sleep(0.05)  # a child's file: there is no event to wait on
    raise BenchProcessError(f"not ready within {timeout_s:.0f} s:\n{_log_tail(log)}")


class TreeDaemon:
    """`python -m node_daemon daemon` from a tree, simulated backend; a context manager."""

    def __init__(self, tree: Tree, workdir: Path, config: str = "", gpus: int = 2) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.tree, self.workdir, self._config, self._gpus = tree, workdir, config, gpus
        self.log = workdir / "daemon.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.address = ""

    def start(self) -> TreeDaemon:
        ready, config = self.workdir / "ready", self.workdir / "daemon.toml"
        config.write_text(f"[daemon]\n{self._config}", encoding="utf-8")
        argv = [sys.executable, "-m", "node_daemon", "daemon", "--backend", "simulated",
                "--gpus", str(self._gpus), "--listen", "127.0.0.1:0", "--ready-file", str(ready),
                "--state-dir", str(self.workdir / "state"), "--config", str(config)]  # fmt: skip
        with self.log.open("wb") as log:
            # cwd outside both trees: imports come from PYTHONPATH, not the current directory
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=self.tree.env(), cwd=self.workdir,
            )  # fmt: skip
        self.address = wait_for_file(ready, self.proc, self.log, 60)
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None, "start() first"
        return self.proc.pid

    def log_bytes(self) -> int:
        return self.log.stat().st_size if self.log.exists() else 0

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        stop_process(proc, 20)

    def __enter__(self) -> TreeDaemon:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def stop_process(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """Resume `proc` (a stopped process ignores SIGTERM), TERM it, KILL it after `grace_s`."""
    os.kill(proc.pid, signal.SIGCONT)
    proc.terminate()
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def measure_trees(
    args: argparse.Namespace,
    prefix: str,
    what: str,
    measure: Callable[[Tree, Path, argparse.Namespace], dict[str, Any]],
) -> dict[str, dict[str, Any]]:
    """`measure` on the baseline ("before", with --baseline) then this checkout ("after").

    Each is announced as 'LABEL: WHAT (PATH)'; all run in one scratch directory named
    after `prefix`, gone afterwards. Returns the readings by label.
    """
    runs: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix=prefix) as workdir:
        for tree in trees(args.baseline):
            print(f"{tree.label}: {what} ({tree.path})", flush=True)
            runs[tree.label] = measure(tree, Path(workdir), args)
    return runs


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise BenchProcessError(f"no VmRSS for {pid}")


def ratio(before: float | None, after: float | None) -> float | None:
    """after / before, or None where either is missing or before is 0."""
    if before is None or after is None or before == 0:
        return None
    return round(after / before, 4)
