"""FleetProcess: the benchmark's side of bench/fleet_host.py (start, measure, stop)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from machine import cpu_seconds, rss_bytes

FLEET_HOST = Path(__file__).resolve().with_name("fleet_host.py")


class FleetError(RuntimeError):
    pass


class FleetProcess:
    """N simulated daemons in one child process; `stop()` (or leaving `with`) ends it."""

    def __init__(self, nodes: int, gpus: int, workdir: Path, interval_s: float = 1.0) -> None:
        self._argv = [
            sys.executable, str(FLEET_HOST), "--nodes", str(nodes), "--gpus", str(gpus),
            "--interval", str(interval_s), "--ready-file", str(workdir / "fleet.json"),
            "--state-dir", str(workdir / "state"), "--watch-stdin",
        ]  # fmt: skip
        self._ready = workdir / "fleet.json"
        self._log = workdir / "fleet.log"
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self._proc is not None, "start() first"
        return self._proc.pid

    def start(self, timeout_s: float) -> list[str]:
        """Start the child; returns the daemons' addresses once all of them serve."""
        with self._log.open("wb") as log_file:
            # stdin stays open while we live: the child stops itself at EOF.
            self._proc = subprocess.Popen(
                self._argv, stdin=subprocess.PIPE, stdout=log_file, stderr=subprocess.STDOUT
            )
        return self._wait_ready(self._proc, timeout_s)

    def _wait_ready(self, proc: subprocess.Popen[bytes], timeout_s: float) -> list[str]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._ready.exists():
                return list(json.loads(self._ready.read_text(encoding="utf-8"))["addresses"])
            if proc.poll() is not None:
                raise FleetError(f"fleet host exited with {proc.returncode}:\n{self.log_tail()}")
            time.sleep(0.05)  # polling a child's file: there is no event to wait on
        raise FleetError(f"fleet did not start within {timeout_s:.0f} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 20) -> str:
        text = self._log.read_text(encoding="utf-8", errors="replace") if self._log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pid)

    def rss_bytes(self) -> int:
        return rss_bytes(self.pid)

    def stop(self, timeout_s: float = 20.0) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        finally:
            if proc.stdin is not None:
                proc.stdin.close()

    def __enter__(self) -> FleetProcess:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()
