"""One simulated GPU: load drives power, power drives temperature with inertia."""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

from gpufleet.v1.gpu_metrics import (
    ECC_CORRECTED_TOTAL,
    ECC_UNCORRECTED_TOTAL,
    ENERGY_J,
    FAN_PCT,
    MEM_CLOCK_MHZ,
    MEM_TOTAL_BYTES,
    MEM_USED_BYTES,
    PCIE_RX_BYTES_PER_S,
    PCIE_TX_BYTES_PER_S,
    POWER_W,
    PSTATE,
    SM_CLOCK_MHZ,
    TEMP_GPU_C,
    TEMP_MEM_C,
    THROTTLE_REASONS,
    UTIL_GPU_PCT,
    UTIL_MEM_PCT,
)
from node_daemon.backends.readings import GpuReading, ProcessReading, lost_reading
from node_daemon.backends.simulated.scenario import ScenarioEvent
from node_daemon.backends.simulated.specs import GIB, GpuSpec

AMBIENT_C = 28.0
# Time constant of the heatsink: how fast temperature follows power, seconds.
THERMAL_TAU_S = 25.0
# Cooling failure multiplies the thermal resistance: full load then settles near 100 °C.
OVERHEAT_FACTOR = 1.75
LEAK_BYTES_PER_S = 48 * 1024**2
# A misbehaving board (or a raised limit elsewhere): draws 8 % above its limit.
OVERPOWER_FACTOR = 1.08
THROTTLE_SW_POWER_CAP = 0x4
THROTTLE_SW_THERMAL = 0x20
THROTTLE_HW_THERMAL = 0x40
CONTEXT_OVERHEAD_BYTES = 512 * 1024**2

_USERS = ("alice", "bob", "carol", "dmitri", "erin", "farid")
_COMMANDS = (
    "python train.py --model llama-8b",
    "torchrun --nproc_per_node 8 finetune.py",
    "python -m vllm.entrypoints.api_server",
    "python eval.py --suite mmlu",
    "jupyter-kernel",
)


@dataclass
class SimProcess:
    pid: int
    user: str
    command: str
    memory_bytes: float
    started_unix_ms: int
    leaking: bool = False
    slurm_job_id: str | None = None
    container_id: str | None = None
    workload: bool = False  # a real process the daemon launched, shown here


class SimulatedGpu:
    """State of one GPU, advanced in fixed steps by `step()`; deterministic from its seed."""

    def __init__(self, index: int, spec: GpuSpec, seed: int, start_unix_ms: int) -> None:
        self.index, self.spec, self._seed = index, spec, seed
        self._rng = random.Random(seed * 1009 + index)
        self._start_unix_ms = start_unix_ms
        self.lost = False
        self._overheating = False
        self._target_util = self._rng.choice((0.0, 0.0, 35.0, 70.0, 95.0))
        self._forced_util: float | None = None
        self._power_factor = 1.0
        self.util = self._target_util
        # Start warm, as a server that has been running: at the load's steady temperature.
        self.temp_c = self._equilibrium_c(self.power_w())
        self.energy_j = 0.0
        self.ecc_corrected = 0
        self.ecc_uncorrected = 0
        self._pending_xids: list[int] = []
        self.processes: list[SimProcess] = []
        if self._target_util > 0:
            self._spawn_process(leaking=False)

    # -- scripted events ---------------------------------------------------

    def apply(self, event: ScenarioEvent) -> None:
        handler = getattr(self, f"_on_{event.kind}")
        handler(event.value)

    def _on_overheat(self, _value: float | None) -> None:
        self._overheating = True
        self._forced_util = 100.0

    def _on_cool(self, _value: float | None) -> None:
        self._overheating = False
        self._forced_util = None
        self._power_factor = 1.0

    def _on_load(self, value: float | None) -> None:
        self._forced_util = max(0.0, min(100.0, value or 0.0))
        if self._forced_util > 0 and not self.processes:
            self._spawn_process(leaking=False)

    def _on_leak(self, _value: float | None) -> None:
        self._forced_util = 3.0
        self._spawn_process(leaking=True, command="python serve_embeddings.py --port 8100")

    def _on_ecc(self, value: float | None) -> None:
        self.ecc_uncorrected += int(value or 1)

    def _on_ecc_correctable(self, value: float | None) -> None:
        self.ecc_corrected += int(value or 1)

    def _on_overpower(self, _value: float | None) -> None:
        self._forced_util = 100.0
        self._power_factor = OVERPOWER_FACTOR

    def _on_idle(self, _value: float | None) -> None:
        if not self.processes:
            self._spawn_process(leaking=False)
        self._forced_util = 0.0

    def _on_xid(self, value: float | None) -> None:
        self._pending_xids.append(int(value or 0))

    def _on_lost(self, _value: float | None) -> None:
        self.lost = True

    def _on_recover(self, _value: float | None) -> None:
        self.lost = False

    def _spawn_process(self, leaking: bool, command: str | None = None) -> None:
        pid = 100_000 + self.index * 1000 + len(self.processes) + self._rng.randrange(900)
        memory = self._rng.uniform(0.2, 0.6) * self.spec.memory_total_bytes
        self.processes.append(
            SimProcess(
                pid=pid,
                user=self._rng.choice(_USERS),
                command=command or self._rng.choice(_COMMANDS),
                memory_bytes=1 * GIB if leaking else memory,
                started_unix_ms=self._start_unix_ms,
                leaking=leaking,
                slurm_job_id=self._slurm_job(),
                container_id=self._container(),
            )
        )

    # Even seeds play Slurm nodes (one job per half node), odd ones container hosts.
    def _slurm_job(self) -> str | None:
        return str(41000 + self._seed * 10 + self.index // 4) if self._seed % 2 == 0 else None

    def _container(self) -> str | None:
        if self._seed % 2 == 0:
            return None
        return hashlib.sha256(f"{self._seed}-{self.index}".encode()).hexdigest()

    # -- workloads from the daemon's queue -------------------------------------

    def attach(self, pid: int, user: str, command: str, memory_bytes: int, started_ms: int) -> None:
        """A real workload process 'runs' here: it holds memory and drives the load."""
        self.processes.append(
            SimProcess(pid, user, command, float(memory_bytes), started_ms, workload=True)
        )

    def detach(self, pid: int) -> bool:
        before = len(self.processes)
        self.processes = [p for p in self.processes if p.pid != pid]
        return len(self.processes) != before

    def _workload_util(self) -> float | None:
        return 95.0 if any(p.workload for p in self.processes) else None

    # -- physics -----------------------------------------------------------

    def step(self, dt_s: float) -> None:
        """Advance the model by dt_s seconds."""
        self._drift_load()
        goal = self._forced_util if self._forced_util is not None else self._target_util
        if self._workload_util() is not None and self._forced_util is None:
            goal = self._workload_util() or goal
        self.util += (goal - self.util) * min(1.0, dt_s / 3.0)
        power = self.power_w()
        equilibrium = self._equilibrium_c(power)
        self.temp_c += (equilibrium - self.temp_c) * min(1.0, dt_s / THERMAL_TAU_S)
        self.energy_j += power * dt_s
        for proc in self.processes:
            if proc.leaking:
                proc.memory_bytes += LEAK_BYTES_PER_S * dt_s
        if self._rng.random() < 0.002 * dt_s:
            self.ecc_corrected += 1

    def _equilibrium_c(self, power_w: float) -> float:
        resistance = (self.spec.full_load_temp_c - AMBIENT_C) / self.spec.power_limit_w
        if self._overheating:
            resistance *= OVERHEAT_FACTOR
        return AMBIENT_C + resistance * power_w

    def _drift_load(self) -> None:
        # Jobs come and go: now and then a GPU changes its phase.
        if self._rng.random() < 0.01:
            self._target_util = self._rng.choice((0.0, 20.0, 60.0, 90.0, 100.0))

    def power_w(self) -> float:
        spread = self.spec.power_limit_w - self.spec.idle_power_w
        jitter = self._rng.uniform(-0.02, 0.02) * spread
        power = self.spec.idle_power_w + spread * self.util / 100 + jitter
        return max(self.spec.idle_power_w, power) * self._power_factor

    def memory_used_bytes(self) -> int:
        used = CONTEXT_OVERHEAD_BYTES * len(self.processes)
        used += sum(int(p.memory_bytes) for p in self.processes)
        return min(used, self.spec.memory_total_bytes)

    # -- readings ----------------------------------------------------------

    def reading(self) -> GpuReading:
        if self.lost:
            return lost_reading(self.index)
        spec, util = self.spec, self.util
        xids, self._pending_xids = tuple(self._pending_xids), []
        return GpuReading.of(self.index, {
            UTIL_GPU_PCT: round(util, 1),
            UTIL_MEM_PCT: round(util * 0.6, 1),
            MEM_USED_BYTES: self.memory_used_bytes(),
            MEM_TOTAL_BYTES: spec.memory_total_bytes,
            TEMP_GPU_C: round(self.temp_c, 1),
            TEMP_MEM_C: round(self.temp_c + 6.0, 1) if spec.has_memory_temp else None,
            POWER_W: round(self.power_w(), 1),
            FAN_PCT: self._fan_pct() if spec.has_fan else None,
            SM_CLOCK_MHZ: self._sm_clock_mhz(),
            MEM_CLOCK_MHZ: spec.mem_clock_mhz if util > 0 else 405,
            PCIE_TX_BYTES_PER_S: int(util * 120e6),
            PCIE_RX_BYTES_PER_S: int(util * 250e6),
            PSTATE: 0 if util >= 1 else 8,
            THROTTLE_REASONS: self._throttle_reasons(),
            ECC_CORRECTED_TOTAL: self.ecc_corrected,
            ECC_UNCORRECTED_TOTAL: self.ecc_uncorrected,
            ENERGY_J: round(self.energy_j, 1),
        }, xids=xids)  # fmt: skip

    def process_readings(self) -> list[ProcessReading]:
        if self.lost:
            return []
        return [
            ProcessReading(
                pid=p.pid,
                gpu_memory_bytes=int(p.memory_bytes),
                start_time_unix_ms=p.started_unix_ms,
                user=p.user,
                command=p.command,
                slurm_job_id=p.slurm_job_id,
                container_id=p.container_id,
            )
            for p in self.processes
        ]

    def _fan_pct(self) -> float:
        return round(max(30.0, min(100.0, 30.0 + (self.temp_c - 40.0) * 2.0)), 0)

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
        if self.power_w() >= 0.98 * self.spec.power_limit_w:
            reasons |= THROTTLE_SW_POWER_CAP
        return reasons
