"""SimulatedBackend: a whole GPU server in software, driven by a clock of fixed steps."""

from __future__ import annotations

import dataclasses
import logging
import random
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence

from node_daemon.backends.base import PowerLimitRefused
from node_daemon.backends.process_watch import ProcessWatch
from node_daemon.backends.readings import (
    BackendKind,
    GpuReading,
    GpuStatic,
    NodeFacts,
    ProcessReading,
)
from node_daemon.backends.simulated.events import apply_event
from node_daemon.backends.simulated.gpu import DEFAULT_LOAD_PHASE_S, SimulatedGpu
from node_daemon.backends.simulated.processes import workload_process
from node_daemon.backends.simulated.scenario import Scenario, ScenarioEvent
from node_daemon.backends.simulated.specs import GpuSpec, spec_for

log = logging.getLogger(__name__)


class SimulatedBackend:
    """A deterministic GPU server: the same seed and steps give the same readings.

    Each `read_gpus()` advances simulated time by `step_s`, so the model runs at
    the sampler's pace and scenario times are seconds of sampling. `advance(dt_s)`
    does the same by any step, with no thread and no wall clock: a benchmark
    replays a week in minutes by calling it in a loop.
    """

    kind = BackendKind.SIMULATED

    def __init__(
        self,
        gpu_count: int = 8,
        seed: int = 0,
        model: str | None = None,
        scenario: Scenario | None = None,
        step_s: float = 1.0,
        start_unix_ms: int | None = None,
        load_phase_s: float = DEFAULT_LOAD_PHASE_S,
    ) -> None:
        if gpu_count < 1:
            raise ValueError(f"a simulated node needs at least 1 GPU, got {gpu_count}")
        self._seed, self._step_s = seed, step_s
        self._spec: GpuSpec = spec_for(model, seed)
        self._scenario = scenario or Scenario()
        start_ms = int(time.time() * 1000) if start_unix_ms is None else start_unix_ms
        self.start_unix_ms = start_ms
        if not load_phase_s > 0:
            raise ValueError(f"load_phase_s must be > 0 seconds, got {load_phase_s}")
        self._gpus = [
            SimulatedGpu(i, self._spec, seed, start_ms, load_phase_s) for i in range(gpu_count)
        ]
        self._sim_time_s = 0.0
        # Changes asked for from other threads, applied on the sampler's next sweep.
        self._pending: deque[Callable[[], object]] = deque()
        self._lock = threading.Lock()
        self._watch = ProcessWatch()

    @property
    def sim_time_s(self) -> float:
        return self._sim_time_s

    def open(self) -> NodeFacts:
        # Seeds 3, 7, 11... play a node left behind on an older driver: fleet drift.
        driver, cuda = ("535.161.08", "12.2") if self._seed % 4 == 3 else ("550.54.15", "12.4")
        return NodeFacts(driver, cuda, tuple(self._static(g) for g in self._gpus))

    def _static(self, gpu: SimulatedGpu) -> GpuStatic:
        rng = random.Random(self._seed * 7919 + gpu.index)
        spec = gpu.spec
        return GpuStatic(
            index=gpu.index,
            uuid=f"GPU-{uuid.UUID(int=rng.getrandbits(128), version=4)}",
            name=spec.name,
            serial=f"{1650000000000 + self._seed * 100 + gpu.index}",
            pci_bus_id=f"00000000:{0x18 + gpu.index * 0x10:02X}:00.0",
            memory_total_bytes=spec.memory_total_bytes,
            power_limit_w=spec.power_limit_w,
            power_limit_default_w=spec.power_limit_w,
            power_limit_min_w=spec.power_limit_min_w,
            power_limit_max_w=spec.power_limit_w,
            temp_slowdown_c=spec.temp_slowdown_c,
            temp_shutdown_c=spec.temp_shutdown_c,
            vbios_version=spec.vbios_version,
        )

    def attach_process(
        self, gpu: int, pid: int, user: str, command: str, memory_bytes: int, started_ms: int
    ) -> None:
        """Show a launched workload's process on a simulated GPU (thread-safe)."""
        process = workload_process(pid, user, command, memory_bytes, started_ms)
        self._pending.append(lambda: self._gpus[gpu].attach(process))

    def inject(self, event: ScenarioEvent) -> None:
        """Apply a scripted event at the next step, whatever its `at_s` (thread-safe)."""
        self._pending.append(lambda: self._apply(event.gpu, event))

    def detach_process(self, pid: int) -> None:
        self._pending.append(lambda: [g.detach(pid) for g in self._gpus])

    def remove_simulated_process(self, gpu: int, pid: int) -> bool:
        """'Kill' one of the simulator's own (fake) processes; False if it has none such."""
        with self._lock:
            fake = any(p.pid == pid and not p.workload for p in self._gpus[gpu].processes)
            if fake:
                self._gpus[gpu].detach(pid)
            return fake

    def read_gpus(self) -> Sequence[GpuReading]:
        return self.advance(self._step_s)

    def advance(self, dt_s: float) -> Sequence[GpuReading]:
        """Run the model `dt_s` simulated seconds on, then read every GPU."""
        if not dt_s > 0:
            raise ValueError(f"simulated time only moves forward: dt_s must be > 0, got {dt_s}")
        with self._lock:
            while self._pending:
                self._pending.popleft()()
            return self._step(dt_s)

    def _step(self, dt_s: float) -> Sequence[GpuReading]:
        previous = self._sim_time_s
        self._sim_time_s += dt_s
        for event in self._scenario.due(previous, self._sim_time_s):
            self._apply(event.gpu, event)
        for gpu in self._gpus:
            gpu.step(dt_s)
        return [gpu.reading() for gpu in self._gpus]

    def _apply(self, index: int, event: ScenarioEvent) -> None:
        if not 0 <= index < len(self._gpus):
            log.warning(
                "scenario event for GPU %d ignored: node has %d GPUs", index, len(self._gpus)
            )
            return
        log.info("scenario: %s", event)
        apply_event(self._gpus[index], event)

    def set_power_limit_w(self, index: int, watts: float) -> None:
        """PowerLimitControl: the GPU's draw (and so its temperature) follows the new limit."""
        with self._lock:
            if not 0 <= index < len(self._gpus):
                raise PowerLimitRefused(f"no GPU {index}: this node has {len(self._gpus)}")
            gpu = self._gpus[index]
            if gpu.lost:
                raise PowerLimitRefused(f"GPU {index} is lost: its power limit cannot be set")
            low, high = gpu.spec.power_limit_min_w, gpu.spec.power_limit_w
            if not low <= watts <= high:
                raise PowerLimitRefused(
                    f"{watts:g} W is outside GPU {index}'s range {low:g}-{high:g} W"
                )
            log.info("GPU %d power limit %g W -> %g W", index, gpu.power_limit_w, watts)
            gpu.power_limit_w = float(watts)

    def read_processes(self) -> Mapping[int, Sequence[ProcessReading]]:
        with self._lock:
            processes = {
                gpu.index: [self._host_side(p) for p in gpu.process_readings()]
                for gpu in self._gpus
            }
            self._watch.end_round()
            return processes

    def _host_side(self, process: ProcessReading) -> ProcessReading:
        """A workload (a real process: no simulated CPU %) gets its CPU and memory from /proc."""
        if process.cpu_pct is not None:
            return process
        measured = self._watch.describe(process.pid, process.gpu_memory_bytes)
        # Its Slurm job too, as the NVML backend reads it (a real Slurm job's process).
        return dataclasses.replace(
            process, cpu_pct=measured.cpu_pct, host_memory_bytes=measured.host_memory_bytes,
            slurm_job_id=process.slurm_job_id or measured.slurm_job_id,
        )  # fmt: skip

    def close(self) -> None:
        """Nothing to release."""
