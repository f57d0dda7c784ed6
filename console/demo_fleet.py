"""DemoFleet: simulated GPU servers as real daemon processes on loopback."""

from __future__ import annotations

import ctypes
import logging
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

log = logging.getLogger(__name__)

RESOURCES = Path(__file__).resolve().parents[1] / "resources"
DEMO_SCENARIO = RESOURCES / "scenarios" / "demo.toml"
START_TIMEOUT_S = 30.0
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child: get SIGTERM when the demo dies, even by SIGKILL or a Qt abort."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class DemoFleetError(RuntimeError):
    pass


class DemoFleet:
    """Starts N `gpufleet daemon --backend simulated` processes; stop() ends them all."""

    def __init__(self, nodes: int = 4, gpus: int = 8, interval_s: float = 1.0) -> None:
        self._nodes, self._gpus, self._interval_s = nodes, gpus, interval_s
        self._dir = tempfile.TemporaryDirectory(prefix="gpufleet-demo-")
        self._procs: list[subprocess.Popen[bytes]] = []
        self.targets: list[str] = []

    def start(self) -> list[str]:
        ready_files = [self._spawn(i) for i in range(self._nodes)]
        self.targets = [
            self._wait_ready(f, p) for f, p in zip(ready_files, self._procs, strict=True)
        ]
        pids = " ".join(str(p.pid) for p in self._procs)
        log.info("demo daemons serving on %s (pids %s)", " ".join(self.targets), pids)
        return self.targets

    def _spawn(self, i: int) -> Path:
        ready = Path(self._dir.name) / f"node-{i}.addr"
        argv = [
            sys.executable, "-m", "node_daemon", "daemon", "--backend", "simulated",
            "--gpus", str(self._gpus), "--seed", str(i), "--listen", "127.0.0.1:0",
            "--interval", str(self._interval_s), "--ready-file", str(ready),
            "--hostname", f"gpu-node-{i + 1:02d}",
            "--state-dir", str(Path(self._dir.name) / f"node-{i}-state"),
        ]  # fmt: skip
        if i == 1 and DEMO_SCENARIO.is_file():
            argv += ["--scenario", str(DEMO_SCENARIO)]
        log_file = open(Path(self._dir.name) / f"node-{i}.log", "wb")  # noqa: SIM115
        self._procs.append(
            subprocess.Popen(
                argv, stdout=log_file, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent
            )
        )
        return ready

    def _wait_ready(self, ready: Path, proc: subprocess.Popen[bytes]) -> str:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if ready.exists():
                return ready.read_text(encoding="utf-8").strip()
            if proc.poll() is not None:
                log_text = ready.with_suffix(".log").read_text(errors="replace")
                raise DemoFleetError(f"demo daemon exited with {proc.returncode}:\n{log_text}")
            time.sleep(0.05)  # polling a child's file: there is no event to wait on
        raise DemoFleetError(f"demo daemon did not start within {START_TIMEOUT_S:.0f} s")

    def stop(self, grace_s: float = 5.0) -> None:
        for proc in self._procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for proc in self._procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._procs.clear()
        self._dir.cleanup()

    def __enter__(self) -> DemoFleet:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()
