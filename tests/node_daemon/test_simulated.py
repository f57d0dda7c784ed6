"""The simulated backend: deterministic physics and scripted faults."""

from __future__ import annotations

import itertools

from gpufleet.v1.gpu_metrics import (
    ECC_UNCORRECTED_TOTAL,
    FAN_PCT,
    MEM_USED_BYTES,
    POWER_W,
    TEMP_GPU_C,
    TEMP_MEM_C,
    THROTTLE_REASONS,
    UTIL_GPU_PCT,
)
from node_daemon.backends.readings import GpuHealth
from node_daemon.backends.simulated import SimulatedBackend
from node_daemon.backends.simulated.scenario import Scenario, ScenarioEvent


def run(backend: SimulatedBackend, steps: int) -> list:
    backend.open()
    return [backend.read_gpus() for _ in range(steps)]


def scenario(*events: tuple[float, int, str, float | None]) -> Scenario:
    return Scenario(tuple(ScenarioEvent(at, gpu, kind, value) for at, gpu, kind, value in events))


def test_same_seed_gives_same_readings() -> None:
    first = run(SimulatedBackend(seed=3), 50)
    second = run(SimulatedBackend(seed=3), 50)
    other = run(SimulatedBackend(seed=4), 50)
    assert first == second
    assert first != other


def test_static_facts_are_stable_and_unique_per_gpu() -> None:
    facts = SimulatedBackend(gpu_count=8, seed=1).open()
    assert facts == SimulatedBackend(gpu_count=8, seed=1).open()
    assert len({g.uuid for g in facts.gpus}) == 8
    assert all(g.uuid.startswith("GPU-") for g in facts.gpus)
    assert facts.driver_version and facts.cuda_version == "12.4"


def test_load_drives_power_and_power_drives_temperature_with_inertia() -> None:
    backend = SimulatedBackend(gpu_count=2, model="h100", scenario=scenario(
        (1, 0, "load", 0.0), (1, 1, "load", 100.0)))  # fmt: skip
    readings = run(backend, 120)
    idle, busy = readings[-1]
    assert busy[POWER_W] > 3 * idle[POWER_W]
    temps = [r[1][TEMP_GPU_C] for r in readings[5:]]
    assert temps[-1] > temps[0] + 10  # it warmed up...
    assert temps[1] - temps[0] < 5  # ...gradually, not in one step


def test_overheat_crosses_critical_line_within_two_minutes() -> None:
    readings = run(SimulatedBackend(scenario=scenario((1, 3, "overheat", None))), 120)
    temps = [r[3][TEMP_GPU_C] for r in readings]
    assert max(temps) >= 85.0
    assert readings[-1][3][THROTTLE_REASONS] & 0x20  # software thermal slowdown


def test_leak_memory_only_grows_while_gpu_idles() -> None:
    readings = run(SimulatedBackend(scenario=scenario((1, 2, "leak", None))), 60)
    used = [r[2][MEM_USED_BYTES] for r in readings[2:]]
    assert all(b > a for a, b in itertools.pairwise(used))
    assert readings[-1][2][UTIL_GPU_PCT] < 10


def test_ecc_and_xid_events() -> None:
    backend = SimulatedBackend(scenario=scenario((2, 1, "ecc", 2.0), (3, 1, "xid", 79.0)))
    readings = run(backend, 5)
    assert [r[1][ECC_UNCORRECTED_TOTAL] for r in readings] == [0, 2, 2, 2, 2]
    assert [r[1].xids for r in readings] == [(), (), (79,), (), ()]


def test_lost_gpu_reports_no_metrics_then_recovers() -> None:
    backend = SimulatedBackend(scenario=scenario((2, 5, "lost", None), (4, 5, "recover", None)))
    readings = run(backend, 5)
    lost = readings[2][5]
    assert lost.health is GpuHealth.LOST and lost[TEMP_GPU_C] is None and lost[POWER_W] is None
    assert readings[2][4].health is GpuHealth.OK  # the others keep reporting
    assert readings[4][5].health is GpuHealth.OK and readings[4][5][TEMP_GPU_C] is not None


def test_unavailable_fields_are_none_not_sentinels() -> None:
    h100 = run(SimulatedBackend(model="h100"), 1)[0][0]
    l40s = run(SimulatedBackend(model="l40s"), 1)[0][0]
    assert h100[FAN_PCT] is None and h100[TEMP_MEM_C] is not None  # passively cooled, HBM
    assert l40s[TEMP_MEM_C] is None and l40s[FAN_PCT] is not None  # GDDR reports no mem temp


def test_memory_follows_processes() -> None:
    backend = SimulatedBackend(gpu_count=4, seed=2)
    reading = run(backend, 1)[0]
    processes = backend.read_processes()
    for gpu in reading:
        held = sum(p.gpu_memory_bytes for p in processes[gpu.index])
        assert gpu[MEM_USED_BYTES] >= held
        assert (gpu[MEM_USED_BYTES] == 0) == (not processes[gpu.index])
