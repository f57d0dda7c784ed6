"""FleetProcess: the benchmark's side of bench/fleet_host.py (start, measure, stop).

The fleet runs in `processes` child processes (each hosting every K-th node, see
fleet_host.py's --part), at the scheduler priority `nice`: the simulated
daemons stand in for machines of their own, so neither one interpreter lock
for all of them nor equal footing with the console on the console's own CPUs
should be what a console benchmark measures. Their CPU and memory are summed.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from machine import cpu_seconds, rss_bytes

FLEET_HOST = Path(__file__).resolve().with_name("fleet_host.py")
# Light nodes (bench/light_fleet.py): the daemon's wire, not its sampler, history or journal.
LIGHT_FLEET = Path(__file__).resolve().with_name("light_fleet.py")


class FleetError(RuntimeError):
    pass


class FleetProcess:
    """N simulated daemons in child processes; `stop()` (or leaving `with`) ends them."""

    def __init__(
        self,
        nodes: int,
        gpus: int,
        workdir: Path,
        interval_s: float = 1.0,
        processes: int = 1,
        nice: int = 0,
        extra_args: Sequence[str] = (),
        host: Path = FLEET_HOST,
    ) -> None:
        """`extra_args`: more of the host's options (e.g. fleet_host.py's --seed-day), for
        every part; `host`: FLEET_HOST (full daemons) or LIGHT_FLEET (light nodes)."""
        if not 1 <= processes <= nodes:
            raise FleetError(f"processes must be from 1 to the node count ({nodes}): {processes}")
        self._parts = processes
        # nice(1) execs the interpreter: the child's pid stays the one Popen gives.
        prefix = ["nice", "-n", str(nice)] if nice else []
        self._argvs = [
            [*prefix, sys.executable, str(host), "--nodes", str(nodes), "--gpus", str(gpus),
             "--interval", str(interval_s), "--ready-file", str(self._ready(workdir, part)),
             "--state-dir", str(workdir / "state"), "--watch-stdin",
             "--part", f"{part}/{processes}", *extra_args]
            for part in range(1, processes + 1)
        ]  # fmt: skip
        self._workdir = workdir
        self._procs: list[subprocess.Popen[bytes]] = []

    @staticmethod
    def _ready(workdir: Path, part: int) -> Path:
        return workdir / f"fleet-{part}.json"

    def _log(self, part: int) -> Path:
        return self._workdir / f"fleet-{part}.log"

    @property
    def pids(self) -> list[int]:
        assert self._procs, "start() first"
        return [proc.pid for proc in self._procs]

    def start(self, timeout_s: float) -> list[str]:
        """Start the children; returns every daemon's address, in node order, once all serve."""
        for part, argv in enumerate(self._argvs, start=1):
            with self._log(part).open("wb") as log_file:
                # stdin stays open while we live: the child stops itself at EOF.
                self._procs.append(subprocess.Popen(
                    argv, stdin=subprocess.PIPE, stdout=log_file, stderr=subprocess.STDOUT
                ))  # fmt: skip
        deadline = time.monotonic() + timeout_s
        parts = [self._wait_ready(part, proc, deadline) for part, proc in self._numbered()]
        # Part P holds nodes P, P+K, P+2K, ...: interleave them back into node order.
        total = sum(len(addresses) for addresses in parts)
        return [parts[index % self._parts][index // self._parts] for index in range(total)]

    def _numbered(self) -> list[tuple[int, subprocess.Popen[bytes]]]:
        return list(enumerate(self._procs, start=1))

    def _wait_ready(self, part: int, proc: subprocess.Popen[bytes], deadline: float) -> list[str]:
        ready = self._ready(self._workdir, part)
        while time.monotonic() < deadline:
            if ready.exists():
                return list(json.loads(ready.read_text(encoding="utf-8"))["addresses"])
            if proc.poll() is not None:
                raise FleetError(
                    f"fleet host {part} exited with {proc.returncode}:\n{self.log_tail(part)}"
                )
            time.sleep(0.05)  # polling a child's file: there is no event to wait on
        raise FleetError(f"fleet host {part} did not start in time:\n{self.log_tail(part)}")

    def log_tail(self, part: int = 1, lines: int = 20) -> str:
        log = self._log(part)
        text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def cpu_seconds(self) -> float:
        return sum(cpu_seconds(pid) for pid in self.pids)

    def rss_bytes(self) -> int:
        return sum(rss_bytes(pid) for pid in self.pids)

    def stop(self, timeout_s: float = 20.0) -> None:
        procs, self._procs = self._procs, []
        running = [proc for proc in procs if proc.poll() is None]
        for proc in running:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
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
