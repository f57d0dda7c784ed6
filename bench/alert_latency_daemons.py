"""The alert-latency benchmark's nodes: real `gpufleet daemon` processes whose GPUs overheat.

Each node is `python -m node_daemon daemon --backend simulated ...` with a
scenario that makes every GPU overheat and cool again, over and over:

    overheat (cooling fails, full load) -> the GPU climbs past 85 °C (critical)
    cool + load 0 (cooling restored, idle) -> it falls below 72 °C, so the
    gpu_temp alert clears completely and the next crossing raises a NEW alert

GPUs start their cycles staggered over one cycle, and each cool-down lasts a
little longer or shorter (seeded), so every cycle starts from a different
temperature and the crossings of 85 °C fall at every phase of the 1 s tick.
"""

from __future__ import annotations

import contextlib
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from machine import cpu_seconds

# The simulated H100 (node_daemon/backends/simulated/specs.py): with cooling failed
# at full load it settles near 103 °C; idle with cooling restored, near 32 °C.
MODEL = "h100"
CRITICAL_C = 85.0  # docs/alerts.md: gpu_temp critical at 85 °C, critical_for_s = 0
CLEARED_BELOW_C = 72.0  # warning line 75 °C less the 3 °C hysteresis


@dataclass(frozen=True)
class ThermalPlan:
    """One GPU's overheat/cool cycle, in simulated seconds (wall seconds x sim_speed).

    From ~45 °C a failed-cooling H100 crosses 85 °C about 27 simulated seconds
    after `overheat`; `heat_s` leaves a margin past that. After `cool` it is below
    72 °C within about 10 simulated seconds; `cool_s` (+ up to `cool_jitter_s`)
    lets it settle at 40-50 °C before the next cycle.
    """

    sim_speed: float = 3.0
    heat_s: float = 42.0
    cool_s: float = 30.0
    cool_jitter_s: float = 40.0
    max_cool_util: float = 50.0  # percent, while cooling
    lead_wall_s: float = 10.0  # before the first overheat: daemons and console start

    @property
    def mean_cycle_s(self) -> float:
        return self.heat_s + self.cool_s + self.cool_jitter_s / 2

    @property
    def cycle_wall_s(self) -> float:
        return self.mean_cycle_s / self.sim_speed


@dataclass(frozen=True)
class Event:
    at_s: float
    gpu: int
    kind: str
    util: float | None = None

    def toml(self) -> str:
        extra = "" if self.util is None else f"\nutil = {self.util:g}"
        return f'[[event]]\nat = {self.at_s:.3f}\ngpu = {self.gpu}\nkind = "{self.kind}"{extra}\n'


def gpu_cycles(
    gpu: int, stagger: float, plan: ThermalPlan, until_s: float, rng: random.Random
) -> list[Event]:
    """Events for one GPU: idle at once, then overheat/cool cycles from lead + stagger."""
    events = [Event(0.01, gpu, "load", 0.0)]  # start cool, whatever the seed's load was
    at = plan.lead_wall_s * plan.sim_speed + stagger * plan.mean_cycle_s
    while at < until_s:
        cool_at = at + plan.heat_s
        events += [
            Event(at, gpu, "overheat"),
            Event(cool_at, gpu, "cool"),
            # Cooling restored, light load: its level sets where the GPU settles (32-44 °C),
            # so the next climb starts from a temperature of its own, not one of a few.
            Event(cool_at + 0.001, gpu, "load", round(rng.uniform(0.0, plan.max_cool_util), 1)),
        ]
        at = cool_at + plan.cool_s + rng.uniform(0.0, plan.cool_jitter_s)
    return events


def node_scenario(node: int, nodes: int, gpus: int, plan: ThermalPlan, wall_s: float) -> str:
    """The scenario TOML of one node; GPUs of all nodes are staggered over one cycle."""
    rng = random.Random(1009 * node + 17)
    until_s = wall_s * plan.sim_speed
    events: list[Event] = []
    for gpu in range(gpus):
        stagger = (node * gpus + gpu) / (nodes * gpus)
        events += gpu_cycles(gpu, stagger, plan, until_s, rng)
    events.sort(key=lambda e: e.at_s)
    return "\n".join(e.toml() for e in events)


class DaemonError(RuntimeError):
    pass


class DaemonFleet:
    """N `gpufleet daemon` processes on loopback; `stop()` (or leaving `with`) ends them."""

    def __init__(
        self, workdir: Path, nodes: int, gpus: int, interval_s: float, plan: ThermalPlan
    ) -> None:
        self._workdir, self._nodes, self._gpus = workdir, nodes, gpus
        self._interval_s, self._plan = interval_s, plan
        self._procs: list[subprocess.Popen[bytes]] = []
        self.addresses: list[str] = []

    def _argv(self, node: int, scenario: Path) -> list[str]:
        base = self._workdir / f"node-{node:02d}"
        return [
            sys.executable, "-m", "node_daemon", "daemon", "--backend", "simulated",
            "--gpus", str(self._gpus), "--model", MODEL, "--seed", str(node),
            "--interval", str(self._interval_s), "--sim-speed", str(self._plan.sim_speed),
            "--scenario", str(scenario), "--state-dir", str(base.with_suffix(".state")),
            "--listen", "127.0.0.1:0", "--ready-file", str(base.with_suffix(".addr")),
            "--hostname", f"bench-node-{node:02d}",
        ]  # fmt: skip

    def start(self, run_wall_s: float, timeout_s: float) -> list[str]:
        """Start every daemon at once; returns their addresses once all of them serve."""
        for node in range(self._nodes):
            scenario = self._workdir / f"node-{node:02d}.toml"
            scenario.write_text(
                node_scenario(node, self._nodes, self._gpus, self._plan, run_wall_s),
                encoding="utf-8",
            )
            with (self._workdir / f"node-{node:02d}.log").open("wb") as log:
                self._procs.append(
                    subprocess.Popen(
                        self._argv(node, scenario), stdout=log, stderr=subprocess.STDOUT
                    )
                )
        self.addresses = self._wait_ready(timeout_s)
        return self.addresses

    def _wait_ready(self, timeout_s: float) -> list[str]:
        ready = [self._workdir / f"node-{n:02d}.addr" for n in range(self._nodes)]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for node, proc in enumerate(self._procs):
                if proc.poll() is not None:
                    raise DaemonError(
                        f"daemon {node} exited with {proc.returncode}:\n{self.log(node)}"
                    )
            if all(path.exists() and path.read_text().strip() for path in ready):
                return [path.read_text(encoding="utf-8").strip() for path in ready]
            time.sleep(0.05)  # polling the children's files: there is no event to wait on
        raise DaemonError(f"daemons not serving within {timeout_s:.0f} s:\n{self.log(0)}")

    def log(self, node: int, lines: int = 20) -> str:
        path = self._workdir / f"node-{node:02d}.log"
        text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def cpu_seconds(self) -> float:
        """User + system CPU of all daemons so far (those still running)."""
        total = 0.0
        for proc in self._procs:
            with contextlib.suppress(OSError):  # already gone
                total += cpu_seconds(proc.pid)
        return total

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM every daemon, wait up to `grace_s` for all, then SIGKILL what is left."""
        procs, self._procs = self._procs, []
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for proc in procs:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def __enter__(self) -> DaemonFleet:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()
