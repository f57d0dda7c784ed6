"""The replay's script: which fault happens where and when, and what counts as catching it.

Each fault kind is a few simulator events (node_daemon/backends/simulated/scenario.py)
on one GPU: a precursor (the first thing a reading could show) at `onset_s`, then
the failure it leads to. A failure is either scripted (a bus drop, an uncorrectable
ECC error, a failed remap, a link down) or measured in the readings (the slowdown
temperature reached, the GPU's memory full). The signals that count as catching a
fault are alert rules ("alert:temp_trend") and health reasons ("health:ecc_storm").
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from node_daemon.backends.simulated.scenario import ScenarioEvent, scenario_event
from node_daemon.backends.simulated.specs import GIB, GpuSpec

HOUR, MINUTE = 3600.0, 60.0
# What the slowdown and memory-full failures are measured as.
SLOWDOWN, MEMORY_FULL = "slowdown", "memory_full"
MEMORY_FULL_SHARE = 0.99
FAILURE_KILLS_WORK = frozenset(
    {"bus_drop", "bus_drop_sudden", "pcie_link", "ecc_storm", "remap_failure", "nvlink_down",
     "leak_fast", "leak_slow", "leak_busy"}
)  # fmt: skip


@dataclass(frozen=True)
class Script:
    """One fault's events and times (simulated seconds since the start)."""

    events: tuple[ScenarioEvent, ...]
    onset_s: float
    failure_s: float | None  # scripted; None: measured (`FaultKind.measured`)
    fine_until_s: float  # the node is stepped at the kind's fine tick until then
    ends_s: float | None = None  # the faulty process removed (a leak, a sawtooth); None: stays


@dataclass(frozen=True)
class FaultKind:
    name: str
    words: str  # what happens, for the table
    signals: frozenset[str]  # what counts as catching it before (or at) the failure
    tick_s: float  # the node's tick while the fault plays
    script: Callable[[float, int, GpuSpec, random.Random], Script]
    measured: str | None = None  # SLOWDOWN or MEMORY_FULL when the failure is measured
    negative: bool = False  # must not be flagged: any signal is a false alarm
    needs_nvlink: bool = False


def _ev(at: float, gpu: int, kind: str, **options: object) -> ScenarioEvent:
    return scenario_event(round(at, 1), gpu, kind, **options)


def _cooling(t0: float, gpu: int, spec: GpuSpec, rng: random.Random) -> Script:
    minutes = rng.uniform(15, 30)
    repaired = t0 + 90 * MINUTE
    events = (_ev(t0, gpu, "fan_fail", minutes=minutes), _ev(repaired, gpu, "cool"))
    return Script(events, t0, None, repaired + 10 * MINUTE)


def _ecc_storm(t0: float, gpu: int, spec: GpuSpec, rng: random.Random) -> Script:
    fails = t0 + rng.uniform(1, 3) * HOUR
    events = (
        _ev(t0, gpu, "ecc_storm", rate=rng.uniform(15, 40)),
        _ev(fails, gpu, "ecc"), _ev(fails, gpu, "xid", xid=48),
        _ev(fails, gpu, "remap_pending"),
    )  # fmt: skip
    return Script(events, t0, fails, fails + HOUR)


def _remap_failure(t0: float, gpu: int, spec: GpuSpec, rng: random.Random) -> Script:
    second = t0 + rng.uniform(2, 6) * HOUR
    fails = second + rng.uniform(2, 6) * HOUR
    events = (
        _ev(t0, gpu, "ecc"), _ev(t0, gpu, "remap_pending"),
        _ev(second, gpu, "ecc"), _ev(second, gpu, "remap_pending"),
        _ev(fails, gpu, "ecc"), _ev(fails, gpu, "remap_failure"), _ev(fails, gpu, "xid", xid=64),
    )  # fmt: skip
    return Script(events, t0, fails, fails + 30 * MINUTE)


def _bus_drop(t0: float, gpu: int, spec: GpuSpec, rng: random.Random) -> Script:
    seconds = rng.uniform(180, 600)
    drop = t0 + seconds
    return Script((_ev(t0, gpu, "stutter", seconds=seconds),), t0, drop, drop + 30 * MINUTE)


def _bus_drop_sudden(t0: float, gpu: int, spec: GpuSpec, rng: random.Random) -> Script:
    return Script((_ev(t0, gpu, "xid", xid=79),), t0, t0, t0 + 30 * MINUTE)


def _pcie_link(t0: float, gpu: int, spec: GpuSpec, rng: random.Random) -> Script:
    fails = t0 + rng.uniform(1, 2) * HOUR
    events = (_ev(t0, gpu, "pcie_replay_storm", rate=rng.uniform(20, 60)),
              _ev(fails, gpu, "xid", xid=79))  # fmt: skip
    return Script(events, t0, fails, fails + 30 * MINUTE)


def _nvlink(t0: float, gpu: int, spec: GpuSpec, rng: random.Random) -> Script:
    fails = t0 + rng.uniform(20, 60) * MINUTE
    events = (_ev(t0, gpu, "nvlink_errors", rate=rng.uniform(10, 30)),
              _ev(fails, gpu, "nvlink_down", link=rng.randrange(spec.nvlink_links)))  # fmt: skip
    return Script(events, t0, fails, fails + 30 * MINUTE)


def _leak(rate: float, busy: bool, hours: float) -> Callable[..., Script]:
    def script(t0: float, gpu: int, spec: GpuSpec, rng: random.Random) -> Script:
        event = _ev(t0, gpu, "leak", rate_mib_per_min=rate, busy=busy)
        return Script((event,), t0, None, t0 + hours * HOUR, ends_s=t0 + hours * HOUR)

    return script


def _weight_load(t0: float, gpu: int, spec: GpuSpec, rng: random.Random) -> Script:
    gib = round(rng.uniform(0.25, 0.45) * spec.memory_total_bytes / GIB, 1)
    ends = t0 + 40 * MINUTE
    return Script((_ev(t0, gpu, "weight_load", gib=gib),), t0, None, ends, ends)


def _alloc_free(t0: float, gpu: int, spec: GpuSpec, rng: random.Random) -> Script:
    gib = round(rng.uniform(0.1, 0.3) * spec.memory_total_bytes / GIB, 1)
    event = _ev(t0, gpu, "alloc_free", gib=gib, period_s=round(rng.uniform(120, 480)),
                busy=rng.random() < 0.5)  # fmt: skip
    # Three hours: a sawtooth can look like a leak after an hour or more of cycles.
    return Script((event,), t0, None, t0 + 3 * HOUR, t0 + 3 * HOUR)


LEAK = frozenset({"alert:memory_leak"})
KINDS: tuple[FaultKind, ...] = (
    FaultKind("cooling_failure", "fan to 100 %, cooling fails over 15-30 min under full load",
              frozenset({"alert:temp_trend", "alert:gpu_temp", "health:cooling_failing"}), 5.0,
              _cooling, measured=SLOWDOWN),
    FaultKind("ecc_storm", "correctable ECC errors 15-40/min, then an uncorrectable one 1-3 h on",
              frozenset({"health:ecc_storm", "alert:ecc_correctable"}), 30.0, _ecc_storm),
    FaultKind("remap_failure", "a row remapped, another 2-6 h later, the remap fails 2-6 h on",
              frozenset({"health:remap_growth", "health:row_remap_pending",
                         "alert:ecc_uncorrectable"}), 60.0, _remap_failure),
    FaultKind("bus_drop", "readings stutter for 3-10 min, then Xid 79 (off the bus)",
              frozenset({"health:telemetry_gap"}), 10.0, _bus_drop),
    FaultKind("bus_drop_sudden", "Xid 79 with no warning", frozenset({"alert:gpu_lost",
              "alert:xid", "health:gpu_lost", "health:xid_79"}), 10.0, _bus_drop_sudden),
    FaultKind("pcie_link", "PCIe replays 20-60/min, then Xid 79 1-2 h on",
              frozenset({"health:pcie_replay_storm"}), 30.0, _pcie_link),
    FaultKind("nvlink_down", "NVLink CRC errors 10-30/min, the link down 20-60 min on",
              frozenset({"health:nvlink_storm"}), 30.0, _nvlink, needs_nvlink=True),
    FaultKind("leak_fast", "2,880 MiB/min on an idle GPU", LEAK, 10.0,
              _leak(2880.0, False, 1.0), measured=MEMORY_FULL),
    FaultKind("leak_slow", "100 MiB/min on an idle GPU", LEAK, 60.0,
              _leak(100.0, False, 14.0), measured=MEMORY_FULL),
    FaultKind("leak_busy", "400 MiB/min on a busy GPU", LEAK, 30.0,
              _leak(400.0, True, 4.0), measured=MEMORY_FULL),
    FaultKind("weight_load", "a model server loads 25-45 % of memory in 40 s, then serves",
              LEAK, 10.0, _weight_load, negative=True),
    FaultKind("alloc_free", "allocates 10-30 % of memory over 2-8 min, frees it, again, for 3 h",
              LEAK, 10.0, _alloc_free, negative=True),
)  # fmt: skip
BY_NAME = {kind.name: kind for kind in KINDS}


@dataclass(frozen=True)
class Fault:
    kind: FaultKind
    node: int
    gpu: int
    script: Script

    @property
    def label(self) -> str:
        return f"{self.kind.name}@n{self.node}g{self.gpu}"


@dataclass
class Plan:
    nodes: int
    gpus: int
    seconds: float
    faults: list[Fault] = field(default_factory=list)

    def events_of(self, node: int) -> tuple[ScenarioEvent, ...]:
        return tuple(e for f in self.faults if f.node == node for e in f.script.events)

    def faults_of(self, node: int) -> list[Fault]:
        return [f for f in self.faults if f.node == node]


def make_plan(
    nodes: int,
    gpus: int,
    seconds: float,
    per_kind: int,
    seed: int,
    spec_of: Callable[[int], GpuSpec],
) -> Plan:
    """`per_kind` faults of each kind, each on a GPU of its own, at seeded random times."""
    rng = random.Random(seed)
    plan = Plan(nodes, gpus, seconds)
    free = [(n, g) for n in range(nodes) for g in range(gpus)]
    rng.shuffle(free)
    for kind in KINDS:
        for _ in range(per_kind):
            node, gpu = _take(free, kind, spec_of)
            # Room before (warm detectors) and after (the failure and what follows).
            t0 = rng.uniform(0.02, 0.55) * seconds if seconds > 2 * 86400 else 0.1 * seconds
            script = kind.script(round(t0), gpu, spec_of(node), rng)
            plan.faults.append(Fault(kind, node, gpu, script))
    return plan


def _take(
    free: list[tuple[int, int]], kind: FaultKind, spec_of: Callable[[int], GpuSpec]
) -> tuple[int, int]:
    for i, (node, _gpu) in enumerate(free):
        if not kind.needs_nvlink or spec_of(node).nvlink_links > 0:
            return free.pop(i)
    raise ValueError(f"no GPU left for {kind.name}: use more nodes or fewer faults per kind")
