"""One simulated GPU: load drives power, power drives temperature with inertia.

What scripted events do to it is in `events.py`; its reliability counters in
`ras.py`; how its processes' memory moves in `memory.py`.
"""

from __future__ import annotations

import random

from gpufleet.v1 import gpu_metrics as m
from node_daemon.backends.readings import (
    AnyMetric,
    GpuHealth,
    GpuReading,
    ProcessReading,
    lost_reading,
)
from node_daemon.backends.simulated.memory import MemoryPattern
from node_daemon.backends.simulated.processes import ProcessMaker, SimProcess
from node_daemon.backends.simulated.ras import RasCounters
from node_daemon.backends.simulated.specs import GpuSpec

AMBIENT_C = 28.0
# Time constant of the heatsink: how fast temperature follows power, seconds.
THERMAL_TAU_S = 25.0
# Hardware slowdown at the slowdown temperature cuts clocks, and power with them.
HW_SLOWDOWN_POWER = 0.75
THROTTLE_SW_POWER_CAP = 0x4
THROTTLE_SW_THERMAL = 0x20
THROTTLE_HW_THERMAL = 0x40
CONTEXT_OVERHEAD_BYTES = 512 * 1024**2
# A GPU changes its load phase every this many seconds, on average: a lively demo.
DEFAULT_LOAD_PHASE_S = 100.0
# While a GPU stutters, this share of its readings fail (NVML_ERROR_UNKNOWN).
STUTTER_FAIL_SHARE = 1 / 3


class Cooling:
    """How well the heatsink works: a factor on its thermal resistance, 1.0 when healthy.

    A failure ramps the factor from where it is to `worst` over `ramp_s` (0: at once).
    """

    def __init__(self) -> None:
        self._from, self._to, self._start_s, self._ramp_s = 1.0, 1.0, 0.0, 0.0
        self.fan_forced_since_s: float | None = None  # the fan pushed to its maximum

    def fail(self, now_s: float, worst: float, ramp_s: float, fan_to_max: bool) -> None:
        self._from, self._to = self.factor(now_s), worst
        self._start_s, self._ramp_s = now_s, ramp_s
        self.fan_forced_since_s = now_s if fan_to_max else None

    def restore(self) -> None:
        self._from = self._to = 1.0
        self.fan_forced_since_s = None

    def factor(self, now_s: float) -> float:
        done = 1.0 if self._ramp_s <= 0 else min(1.0, (now_s - self._start_s) / self._ramp_s)
        return self._from + (self._to - self._from) * done


class SimulatedGpu:
    """State of one GPU, advanced in fixed steps by `step()`; deterministic from its seed."""

    def __init__(
        self,
        index: int,
        spec: GpuSpec,
        seed: int,
        start_unix_ms: int,
        load_phase_s: float = DEFAULT_LOAD_PHASE_S,
    ) -> None:
        self.index, self.spec, self._load_phase_s = index, spec, load_phase_s
        self.rng = random.Random(seed * 1009 + index)
        self.makes = ProcessMaker(index, seed, self.rng, start_unix_ms)
        self.now_s = 0.0  # simulated seconds since start
        self.lost = False
        self.cooling = Cooling()
        self.power_limit_w = spec.power_limit_w
        self.ras = RasCounters(spec.nvlink_links)
        self.pending_xids: list[int] = []
        self.falling = False  # Xid 79 reported: the GPU is lost after this reading
        self.stutter_until_s: float | None = None
        self._target_util = self.rng.choice((0.0, 0.0, 35.0, 70.0, 95.0))
        self.forced_util: float | None = None
        self.util_plan: list[tuple[float, float]] = []  # (at s, forced util) still to come
        self.power_factor = 1.0
        self.util = self._target_util
        self.temp_c = AMBIENT_C
        self.power = self._power_for(self.util, self._jitter())
        # Start warm, as a server that has been running: at the load's steady temperature.
        self.temp_c = self._equilibrium_c(self.power)
        self.energy_j = 0.0
        self.processes: list[SimProcess] = []
        if self._target_util > 0:
            self.spawn()

    def spawn(self, pattern: MemoryPattern | None = None, command: str | None = None) -> SimProcess:
        """Start one of the simulator's own processes (memory `pattern`, else a random size)."""
        running, total = len(self.processes), self.spec.memory_total_bytes
        process = self.makes.make(running, total, self.now_s, pattern, command)
        self.processes.append(process)
        return process

    # -- workloads from the daemon's queue -------------------------------------

    def attach(self, process: SimProcess) -> None:
        self.processes.append(process)

    def detach(self, pid: int) -> bool:
        before = len(self.processes)
        self.processes = [p for p in self.processes if p.pid != pid]
        return len(self.processes) != before

    def fall_off_bus(self) -> None:
        """Lost: every context on the GPU died with it (the daemon's workloads show on)."""
        self.lost, self.falling, self.stutter_until_s = True, False, None
        self.processes = [p for p in self.processes if p.workload]

    # -- physics -----------------------------------------------------------

    def step(self, dt_s: float) -> None:
        """Advance the model by dt_s seconds."""
        self.now_s += dt_s
        while self.util_plan and self.util_plan[0][0] <= self.now_s:
            self.forced_util = self.util_plan.pop(0)[1]
        self.util += (self._goal_util(dt_s) - self.util) * min(1.0, dt_s / 3.0)
        self.power = self._power_for(self.util, self._jitter())
        equilibrium = self._equilibrium_c(self.power)
        self.temp_c += (equilibrium - self.temp_c) * min(1.0, dt_s / THERMAL_TAU_S)
        self.energy_j += self.power * dt_s
        for process in self.processes:
            process.advance(self.now_s)
        self.ras.step(dt_s, self.rng)
        if self.stutter_until_s is not None and self.now_s >= self.stutter_until_s:
            self.stutter_until_s = None
            self.pending_xids.append(79)
            self.falling = True

    def _goal_util(self, dt_s: float) -> float:
        # Jobs come and go: now and then a GPU changes its phase (as often at any step).
        if self.rng.random() < dt_s / self._load_phase_s:
            self._target_util = self.rng.choice((0.0, 20.0, 60.0, 90.0, 100.0))
        if self.forced_util is not None:
            return self.forced_util
        return 95.0 if any(p.workload for p in self.processes) else self._target_util

    def _equilibrium_c(self, power_w: float) -> float:
        resistance = (self.spec.full_load_temp_c - AMBIENT_C) / self.spec.power_limit_w
        return AMBIENT_C + resistance * self.cooling.factor(self.now_s) * power_w

    def _power_for(self, util: float, jitter: float) -> float:
        spec = self.spec
        spread = spec.power_limit_w - spec.idle_power_w
        # The board holds its draw to the limit (clocks drop), the reading wobbling around
        # it; `overpower` plays a board that fails to.
        demand = min(spec.idle_power_w + spread * util / 100, self.power_limit_w)
        if self.temp_c >= spec.temp_slowdown_c:
            demand *= HW_SLOWDOWN_POWER
        return max(spec.idle_power_w, demand + jitter * spread) * self.power_factor

    def _jitter(self) -> float:
        return self.rng.uniform(-0.02, 0.02)

    def _reported_power(self) -> float:
        """Power as a reading shows it: the tick's draw, sampled with its own noise."""
        return self._power_for(self.util, self._jitter())

    def memory_used_bytes(self) -> int:
        used = CONTEXT_OVERHEAD_BYTES * len(self.processes)
        used += sum(int(p.memory_bytes) for p in self.processes)
        return min(used, self.spec.memory_total_bytes)

    # -- readings ----------------------------------------------------------

    def reading(self) -> GpuReading:
        if self.lost:
            return lost_reading(self.index)
        xids, self.pending_xids = tuple(self.pending_xids), []
        if self.stutter_until_s is not None and self.rng.random() < STUTTER_FAIL_SHARE:
            return GpuReading(self.index, GpuHealth.ERROR, "Unknown Error", xids=xids)
        reading = GpuReading.of(
            self.index,
            {**self._telemetry(), **self.ras.values()},
            xids=xids,
            nvlink_down_links=self.ras.down_links(),
        )
        if self.falling:
            self.fall_off_bus()
        return reading

    def _telemetry(self) -> dict[AnyMetric, float | None]:
        spec, util = self.spec, self.util
        return {
            m.UTIL_GPU_PCT: round(util, 1),
            m.UTIL_MEM_PCT: round(util * 0.6, 1),
            m.MEM_USED_BYTES: self.memory_used_bytes(),
            m.MEM_TOTAL_BYTES: spec.memory_total_bytes,
            m.TEMP_GPU_C: round(self.temp_c, 1),
            m.TEMP_MEM_C: round(self.temp_c + 6.0, 1) if spec.has_memory_temp else None,
            m.POWER_W: round(self._reported_power(), 1),
            m.POWER_LIMIT_W: self.power_limit_w,
            m.FAN_PCT: self._fan_pct() if spec.has_fan else None,
            m.SM_CLOCK_MHZ: self._sm_clock_mhz(),
            m.MEM_CLOCK_MHZ: spec.mem_clock_mhz if util > 0 else 405,
            m.PCIE_TX_BYTES_PER_S: int(util * 120e6),
            m.PCIE_RX_BYTES_PER_S: int(util * 250e6),
            m.PSTATE: 0 if util >= 1 else 8,
            m.THROTTLE_REASONS: self._throttle_reasons(),
            m.ENERGY_J: round(self.energy_j, 1),
        }

    def process_readings(self) -> list[ProcessReading]:
        """Its processes, the GPU's SM load shared among them by the memory each holds."""
        if self.lost:
            return []
        weights = [max(p.memory_bytes, 1.0) for p in self.processes]
        total = sum(weights) or 1.0
        return [
            p.reading(self.util * w / total) for p, w in zip(self.processes, weights, strict=True)
        ]

    def _fan_pct(self) -> float:
        curve = max(30.0, min(100.0, 30.0 + (self.temp_c - 40.0) * 2.0))
        forced = self.cooling.fan_forced_since_s
        if forced is not None:  # failing cooling: the controller drives the fan up in a minute
            curve += (100.0 - curve) * min(1.0, (self.now_s - forced) / 60.0)
        return round(curve, 0)

    def _sm_clock_mhz(self) -> int:
        clock = 210 + (self.spec.max_sm_clock_mhz - 210) * min(1.0, self.util / 40.0)
        if self.temp_c >= self.spec.temp_slowdown_c:
            clock *= 0.6
        return int(clock)

    def _throttle_reasons(self) -> int:
        reasons = 0
        if self.temp_c >= 85.0:
            reasons |= THROTTLE_SW_THERMAL
        if self.temp_c >= self.spec.temp_slowdown_c:
            reasons |= THROTTLE_HW_THERMAL
        if self._reported_power() >= 0.98 * self.power_limit_w:
            reasons |= THROTTLE_SW_POWER_CAP
        return reasons
