"""Running the plan through every node under one healing mode, and watching what happens.

A node is stepped at the fine tick of the faults it is playing (5-60 s, from 10
minutes before a fault's onset until its aftermath has played out) and at the
coarse tick otherwise; nodes are independent, so they run one after another.

Each GPU runs the replay's jobs back to back (1-12 h, 0-30 min apart, seeded per
GPU so every mode sees the same ones), started only on a GPU whose condition
takes new work (not drained, not in a state that forbids it). A job is lost when
its GPU fails under it in a way that kills work (FAILURE_KILLS_WORK); the
simulator's own processes on that GPU die with it.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from fault_replay_node import ReplayNode, Tick, hot, lost, memory_full
from fault_replay_plan import (
    FAILURE_KILLS_WORK,
    HOUR,
    MEMORY_FULL,
    MEMORY_FULL_SHARE,
    MINUTE,
    SLOWDOWN,
    Fault,
    Plan,
)

from node_daemon.backends.readings import GpuReading
from node_daemon.backends.simulated import Scenario
from node_daemon.healing.settings import HealingSettings

START_UNIX_S = 1_800_000_000.0  # 2027-01-15: the replay's simulated epoch
LEAD_IN_S = 10 * MINUTE  # fine ticks start this long before a fault's onset
# The commands of the simulator's fault processes (node_daemon/backends/simulated/events.py).
FAULT_COMMANDS = {
    "leak_fast": "python serve_embeddings.py --port 8100",
    "leak_slow": "python serve_embeddings.py --port 8100",
    "leak_busy": "python serve_embeddings.py --port 8100",
    "weight_load": "python -m vllm.entrypoints.api_server --model llama-70b",
    "alloc_free": "python preprocess.py --cache-on-gpu",
}


@dataclass
class FaultSeen:
    """What became of one fault in one run."""

    fault: Fault
    failure_s: float | None = None  # when it failed (None: it never did)
    drained_s: float | None = None  # when its GPU was first drained after the onset
    would_drain_s: float | None = None  # a dry run's "would do" drain
    jobs_lost: int = 0
    slowdown_s: float = 0.0  # its GPU's time at or above the slowdown temperature


@dataclass
class RunLog:
    """Everything one run saw, by (node, GPU)."""

    mode: str
    raises: list[tuple[float, int, int, str]] = field(default_factory=list)  # t, node, gpu, signal
    faults: list[FaultSeen] = field(default_factory=list)
    reports: list[tuple[float, int, str, int | None, str]] = field(default_factory=list)
    slowdown_s: float = 0.0  # the whole fleet's GPU-seconds at or above slowdown
    jobs_started: int = 0
    jobs_lost: int = 0
    gpu_ticks: int = 0
    wall_s: float = 0.0


@dataclass
class _Job:
    rng: random.Random
    next_start_s: float = 0.0
    until_s: float | None = None
    number: int = 0


class _NodeWatch:
    """Turns one node's ticks into the run log."""

    def __init__(self, node: ReplayNode, faults: list[Fault], log: RunLog, seed: int) -> None:
        self.node, self.log = node, log
        self.seen = [FaultSeen(f) for f in faults]
        log.faults += self.seen
        self.slowdown_c = {g.index: g.temp_slowdown_c for g in node.facts.gpus}
        self._firing: set[tuple[str, int]] = set()
        self._reasons: dict[int, set[str]] = defaultdict(set)
        self._jobs = {g.index: _Job(random.Random(seed * 1000 + g.index)) for g in node.facts.gpus}
        self._done: set[tuple[int, str]] = set()  # (fault number, what) handled once

    def see(self, tick: Tick) -> None:
        self.log.gpu_ticks += len(tick.readings)
        self._signals(tick)
        for number, seen in enumerate(self.seen):
            self._fault(number, seen, tick)
        self._work(tick)
        for report in tick.reports:
            self.log.reports.append((tick.now_s, self.node.index, report.action, report.gpu,
                                     report.outcome))  # fmt: skip
        for reading in tick.readings:
            if hot(reading, self.slowdown_c.get(reading.index)):
                self.log.slowdown_s += tick.dt_s
                for seen in self.seen:
                    if seen.fault.gpu == reading.index:
                        seen.slowdown_s += tick.dt_s

    def _signals(self, tick: Tick) -> None:
        node = self.node.index
        for rule, gpu in sorted(tick.firing - self._firing):
            self.log.raises.append((tick.now_s, node, gpu, f"alert:{rule}"))
        self._firing = tick.firing
        for gpu, condition in tick.conditions.items():
            codes = {r.code for r in condition.reasons}
            for code in sorted(codes - self._reasons[gpu]):
                self.log.raises.append((tick.now_s, node, gpu, f"health:{code}"))
            self._reasons[gpu] = codes

    def _fault(self, number: int, seen: FaultSeen, tick: Tick) -> None:
        fault, now = seen.fault, tick.now_s
        script, gpu = fault.script, fault.gpu
        if now < script.onset_s:
            return
        reading = tick.readings[gpu]
        condition = tick.conditions.get(gpu)
        if seen.drained_s is None and condition is not None and condition.drain is not None:
            seen.drained_s = now
        if seen.would_drain_s is None and any(
            r.gpu == gpu and r.action == "drain" and r.dry_run for r in tick.reports
        ):
            seen.would_drain_s = now
        if seen.failure_s is None and self._failed(fault, reading, now):
            seen.failure_s = now
            if fault.kind.name in FAILURE_KILLS_WORK:
                seen.jobs_lost += self._lose_job(gpu, now)
                if fault.kind.measured == MEMORY_FULL:  # out of memory: the leaker crashes
                    self.node.crash_work(gpu, FAULT_COMMANDS[fault.kind.name])
                else:
                    self.node.crash_work(gpu)
        ends = script.ends_s
        if ends is not None and now >= ends and (number, "end") not in self._done:
            self._done.add((number, "end"))
            self.node.crash_work(gpu, FAULT_COMMANDS.get(fault.kind.name))

    def _failed(self, fault: Fault, reading: GpuReading, now: float) -> bool:
        script, measured = fault.script, fault.kind.measured
        if measured == SLOWDOWN:
            return now <= script.fine_until_s and hot(reading, self.slowdown_c.get(fault.gpu))
        if measured == MEMORY_FULL:
            ends = script.ends_s or script.fine_until_s
            return now <= ends and memory_full(reading, MEMORY_FULL_SHARE)
        return script.failure_s is not None and now >= script.failure_s

    def _lose_job(self, gpu: int, now: float) -> int:
        job = self._jobs[gpu]
        if job.until_s is None or now >= job.until_s:
            return 0
        job.until_s = None
        job.next_start_s = now + job.rng.uniform(0, 30 * MINUTE)
        self.node.busy.pop(gpu, None)
        self.log.jobs_lost += 1
        return 1

    def _work(self, tick: Tick) -> None:
        for gpu, job in self._jobs.items():
            if job.until_s is not None and tick.now_s >= job.until_s:
                job.until_s = None
                job.next_start_s = tick.now_s + job.rng.uniform(0, 30 * MINUTE)
                self.node.busy.pop(gpu, None)
            if job.until_s is None and tick.now_s >= job.next_start_s:
                condition = tick.conditions.get(gpu)
                takes = condition is None or condition.placeable
                if takes and not lost(tick.readings[gpu]):
                    job.until_s = tick.now_s + job.rng.uniform(1, 12) * HOUR
                    job.number += 1
                    self.node.busy[gpu] = f"job-{self.node.index}-{gpu}-{job.number}"
                    self.log.jobs_started += 1


def tick_at(now_s: float, faults: list[Fault], coarse_s: float) -> float:
    """The node's next step: the finest tick of the faults playing now, else coarse (cut
    short so a fault's lead-in is never stepped over)."""
    playing = [f.kind.tick_s for f in faults
               if f.script.onset_s - LEAD_IN_S <= now_s <= f.script.fine_until_s]  # fmt: skip
    if playing:
        return min(playing)
    upcoming = [f.script.onset_s - LEAD_IN_S - now_s for f in faults
                if f.script.onset_s - LEAD_IN_S > now_s]  # fmt: skip
    return max(1.0, min([coarse_s, *upcoming]))


def run_plan(
    plan: Plan, mode: str, healing: HealingSettings, coarse_s: float, load_phase_s: float
) -> RunLog:
    log = RunLog(mode)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fault-replay-") as tmp:
        for index in range(plan.nodes):
            _run_node(plan, index, healing, Path(tmp), coarse_s, load_phase_s, log)
    log.wall_s = time.perf_counter() - started
    return log


def _run_node(
    plan: Plan, index: int, healing: HealingSettings, tmp: Path, coarse_s: float,
    load_phase_s: float, log: RunLog,
) -> None:  # fmt: skip
    faults = plan.faults_of(index)
    scenario = Scenario(tuple(sorted(plan.events_of(index), key=lambda e: e.at_s)))
    node = ReplayNode(index, plan.gpus, scenario, healing, tmp / f"node{index}.sqlite3",
                      START_UNIX_S, load_phase_s)  # fmt: skip
    watch = _NodeWatch(node, faults, log, seed=index)
    try:
        now = 0.0
        while now < plan.seconds - 1e-6:
            dt = min(tick_at(now, faults, coarse_s), plan.seconds - now)
            tick = node.step(dt)
            now = tick.now_s
            watch.see(tick)
    finally:
        node.close()
