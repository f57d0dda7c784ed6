"""The simulated backend: deterministic physics and scripted faults."""

from __future__ import annotations

import itertools

import pytest

from gpufleet.v1 import gpu_metrics as m
from node_daemon.backends.base import PowerLimitRefused
from node_daemon.backends.readings import GpuHealth
from node_daemon.backends.simulated import SimulatedBackend
from node_daemon.backends.simulated.scenario import Scenario, ScenarioEvent
from node_daemon.backends.simulated.specs import GIB

MIB = 1024**2


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
    assert busy[m.POWER_W] > 3 * idle[m.POWER_W]
    temps = [r[1][m.TEMP_GPU_C] for r in readings[5:]]
    assert temps[-1] > temps[0] + 10  # it warmed up...
    assert temps[1] - temps[0] < 5  # ...gradually, not in one step


def test_overheat_crosses_critical_line_within_two_minutes() -> None:
    readings = run(SimulatedBackend(scenario=scenario((1, 3, "overheat", None))), 120)
    temps = [r[3][m.TEMP_GPU_C] for r in readings]
    assert max(temps) >= 85.0
    assert readings[-1][3][m.THROTTLE_REASONS] & 0x20  # software thermal slowdown


def test_leak_memory_only_grows_while_gpu_idles() -> None:
    readings = run(SimulatedBackend(scenario=scenario((1, 2, "leak", None))), 60)
    used = [r[2][m.MEM_USED_BYTES] for r in readings[2:]]
    assert all(b > a for a, b in itertools.pairwise(used))
    assert readings[-1][2][m.UTIL_GPU_PCT] < 10


def test_ecc_and_xid_events() -> None:
    backend = SimulatedBackend(scenario=scenario((2, 1, "ecc", 2.0), (3, 1, "xid", 13.0)))
    readings = run(backend, 5)
    assert [r[1][m.ECC_UNCORRECTED_TOTAL] for r in readings] == [0, 2, 2, 2, 2]
    assert [r[1].xids for r in readings] == [(), (), (13,), (), ()]


def test_lost_gpu_reports_no_metrics_then_recovers() -> None:
    backend = SimulatedBackend(scenario=scenario((2, 5, "lost", None), (4, 5, "recover", None)))
    readings = run(backend, 5)
    lost = readings[2][5]
    assert lost.health is GpuHealth.LOST and lost[m.TEMP_GPU_C] is None and lost[m.POWER_W] is None
    assert readings[2][4].health is GpuHealth.OK  # the others keep reporting
    assert readings[4][5].health is GpuHealth.OK and readings[4][5][m.TEMP_GPU_C] is not None


def test_unavailable_fields_are_none_not_sentinels() -> None:
    h100 = run(SimulatedBackend(model="h100"), 1)[0][0]
    l40s = run(SimulatedBackend(model="l40s"), 1)[0][0]
    assert h100[m.FAN_PCT] is None and h100[m.TEMP_MEM_C] is not None  # passively cooled, HBM
    assert l40s[m.TEMP_MEM_C] is None and l40s[m.FAN_PCT] is not None  # GDDR reports no mem temp


def test_memory_follows_processes() -> None:
    backend = SimulatedBackend(gpu_count=4, seed=2)
    reading = run(backend, 1)[0]
    processes = backend.read_processes()
    for gpu in reading:
        held = sum(p.gpu_memory_bytes for p in processes[gpu.index])
        assert gpu[m.MEM_USED_BYTES] >= held
        assert (gpu[m.MEM_USED_BYTES] == 0) == (not processes[gpu.index])


def advance(backend: SimulatedBackend, seconds: float, step_s: float = 5.0) -> list:
    backend.open()
    return [backend.advance(step_s) for _ in range(int(seconds / step_s))]


def test_health_signals_read_healthy_as_on_a_real_hopper() -> None:
    h100 = run(SimulatedBackend(model="h100"), 1)[0][0]
    healthy = {m.PCIE_REPLAY_TOTAL: 0, m.REMAPPED_ROWS_CORRECTABLE: 0,
               m.REMAPPED_ROWS_UNCORRECTABLE: 0, m.ROW_REMAP_PENDING: 0, m.ROW_REMAP_FAILURE: 0,
               m.NVLINK_CRC_FLIT_ERRORS_TOTAL: 0, m.NVLINK_CRC_DATA_ERRORS_TOTAL: 0,
               m.NVLINK_REPLAY_ERRORS_TOTAL: 0, m.NVLINK_RECOVERY_ERRORS_TOTAL: 0,
               m.NVLINK_LINKS_ACTIVE: 18, m.NVLINK_LINKS_DOWN: 0, m.RECOVERY_ACTION: 0,
               m.POWER_LIMIT_W: 700.0}  # fmt: skip
    assert {metric: h100[metric] for metric in healthy} == healthy
    assert h100.nvlink_down_links == ()
    # Ampere and later remap rows instead of retiring pages: NVML says not supported.
    retired = (m.RETIRED_PAGES_SBE, m.RETIRED_PAGES_DBE, m.RETIRED_PAGES_PENDING)
    assert [h100[metric] for metric in retired] == [None, None, None]
    l40s = run(SimulatedBackend(model="l40s"), 1)[0][0]
    assert l40s[m.NVLINK_LINKS_ACTIVE] is None and l40s[m.NVLINK_REPLAY_ERRORS_TOTAL] is None
    assert l40s[m.PCIE_REPLAY_TOTAL] == 0


def test_static_facts_give_the_power_limit_range() -> None:
    gpu = SimulatedBackend(model="h100").open().gpus[0]
    assert (gpu.power_limit_default_w, gpu.power_limit_min_w, gpu.power_limit_max_w) == (
        700.0, 200.0, 700.0)  # fmt: skip


def test_a_lower_power_limit_lowers_power_and_temperature() -> None:
    busy = scenario((1, 0, "load", 100.0), (1, 1, "load", 100.0))
    backend = SimulatedBackend(gpu_count=2, model="h100", scenario=busy)
    advance(backend, 300)
    backend.set_power_limit_w(1, 350.0)
    free, capped = advance(backend, 300)[-1]
    assert capped[m.POWER_W] <= 350.0 * 1.03 and capped[m.POWER_LIMIT_W] == 350.0  # ±2 % noise
    assert free[m.POWER_W] > 600.0 and free[m.POWER_LIMIT_W] == 700.0
    assert capped[m.TEMP_GPU_C] < free[m.TEMP_GPU_C] - 15  # temperature followed the power down
    assert capped[m.THROTTLE_REASONS] & 0x4  # software power cap


@pytest.mark.parametrize(
    ("index", "watts", "message"),
    [(0, 150.0, "outside GPU 0's range 200-700 W"), (0, 701.0, "outside"), (9, 300.0, "no GPU 9")],
)
def test_power_limit_out_of_range_is_refused(index: int, watts: float, message: str) -> None:
    backend = SimulatedBackend(gpu_count=2, model="h100")
    backend.open()
    with pytest.raises(PowerLimitRefused, match=message):
        backend.set_power_limit_w(index, watts)
    assert backend.read_gpus()[0][m.POWER_LIMIT_W] == 700.0


def test_power_limit_of_a_lost_gpu_is_refused() -> None:
    backend = SimulatedBackend(gpu_count=2, scenario=scenario((1, 1, "lost", None)))
    run(backend, 2)
    with pytest.raises(PowerLimitRefused, match="GPU 1 is lost"):
        backend.set_power_limit_w(1, 300.0)


def test_fan_fail_drives_the_fan_to_its_maximum_while_the_temperature_keeps_rising() -> None:
    backend = SimulatedBackend(gpu_count=2, model="l40s", scenario=scenario(
        (1, 0, "load", 100.0), (1, 1, "load", 100.0), (300, 1, "fan_fail", 20.0)))  # fmt: skip
    readings = advance(backend, 300 + 8 * 60)
    failing = [r[1] for r in readings[60:]]  # from the failure on, every 5 s
    per_minute = [r[m.TEMP_GPU_C] for r in failing[::12]]
    assert all(b > a for a, b in itertools.pairwise(per_minute))  # minute after minute
    assert per_minute[-1] > per_minute[0] + 8
    assert failing[0][m.FAN_PCT] < 100.0 and failing[-1][m.FAN_PCT] == 100.0
    assert readings[-1][0][m.TEMP_GPU_C] < 75.0  # its healthy neighbour under the same load


def test_ecc_storm_adds_correctable_errors_at_its_rate() -> None:
    backend = SimulatedBackend(scenario=scenario((10, 2, "ecc_storm", 60.0)))
    readings = advance(backend, 610)
    start, end = readings[1][2][m.ECC_CORRECTED_TOTAL], readings[-1][2][m.ECC_CORRECTED_TOTAL]
    assert 590 <= end - start <= 610  # 60 a minute for 10 minutes, give or take a stray one
    assert readings[-1][2][m.ECC_UNCORRECTED_TOTAL] == 0


def test_remaps_and_recovery_action_clear_on_reset_but_a_remap_failure_stays() -> None:
    backend = SimulatedBackend(scenario=Scenario((
        ScenarioEvent(2, 0, "remap_pending", 2.0), ScenarioEvent(3, 0, "remap_failure"),
        ScenarioEvent(3, 0, "recovery_action", 1.0), ScenarioEvent(3, 0, "ecc", 2.0),
        ScenarioEvent(5, 0, "reset"))))  # fmt: skip
    readings = [r[0] for r in run(backend, 6)]
    pending = readings[3]
    assert (pending[m.ROW_REMAP_PENDING], pending[m.REMAPPED_ROWS_UNCORRECTABLE]) == (1, 2)
    assert (pending[m.ROW_REMAP_FAILURE], pending[m.RECOVERY_ACTION]) == (1, 1)
    assert pending[m.ECC_UNCORRECTED_TOTAL] == 2
    after = readings[-1]
    assert (after[m.ROW_REMAP_PENDING], after[m.RECOVERY_ACTION]) == (0, 0)
    assert after[m.ECC_UNCORRECTED_TOTAL] == 0  # volatile: since the last reset
    assert (after[m.ROW_REMAP_FAILURE], after[m.REMAPPED_ROWS_UNCORRECTABLE]) == (1, 2)


def test_pcie_replay_storm_counts_replays_at_its_rate() -> None:
    readings = advance(SimulatedBackend(scenario=scenario((6, 1, "pcie_replay_storm", 120.0))), 305)
    assert readings[0][1][m.PCIE_REPLAY_TOTAL] == 0
    assert readings[-1][1][m.PCIE_REPLAY_TOTAL] - readings[1][1][m.PCIE_REPLAY_TOTAL] == 590
    assert readings[-1][0][m.PCIE_REPLAY_TOTAL] == 0


def test_nvlink_down_and_nvlink_errors() -> None:
    events = scenario((2, 0, "nvlink_down", 3.0), (2, 1, "nvlink_errors", 600.0))
    backend = SimulatedBackend(model="h100", scenario=events)
    readings = run(backend, 62)
    down, noisy = readings[-1][0], readings[-1][1]
    assert (down[m.NVLINK_LINKS_ACTIVE], down[m.NVLINK_LINKS_DOWN]) == (17, 1)
    assert down.nvlink_down_links == (3,) and readings[0][0].nvlink_down_links == ()
    flits = noisy[m.NVLINK_CRC_FLIT_ERRORS_TOTAL] - readings[1][1][m.NVLINK_CRC_FLIT_ERRORS_TOTAL]
    assert flits == 600  # 600 a minute for a minute
    assert 0 < noisy[m.NVLINK_CRC_DATA_ERRORS_TOTAL] < noisy[m.NVLINK_REPLAY_ERRORS_TOTAL] < 600
    assert noisy[m.NVLINK_LINKS_DOWN] == 0


def test_nvlink_down_of_a_link_the_gpu_lacks_changes_nothing() -> None:
    readings = run(
        SimulatedBackend(model="a100", scenario=scenario((1, 0, "nvlink_down", 15.0))), 3
    )
    assert readings[-1][0][m.NVLINK_LINKS_ACTIVE] == 12 and readings[-1][0].nvlink_down_links == ()


def test_xid_79_loses_the_gpu_as_a_bus_drop_does() -> None:
    readings = run(SimulatedBackend(scenario=scenario((3, 1, "xid", 79.0))), 5)
    assert readings[2][1].xids == (79,) and readings[2][1].health is GpuHealth.OK
    assert [r[1].health for r in readings[3:]] == [GpuHealth.LOST, GpuHealth.LOST]
    assert readings[-1][0].health is GpuHealth.OK


def test_stutter_drops_readings_now_and_then_then_the_gpu_falls_off_the_bus() -> None:
    backend = SimulatedBackend(scenario=scenario((10, 4, "stutter", 120.0)))
    readings = [r[4] for r in run(backend, 140)]
    before, during = readings[:9], readings[10:129]
    assert all(r.health is GpuHealth.OK for r in before)
    failed = [r for r in during if r.health is GpuHealth.ERROR]
    assert 10 < len(failed) < 80 and all(r[m.TEMP_GPU_C] is None for r in failed)
    assert any(79 in r.xids for r in readings[125:135])
    assert readings[-1].health is GpuHealth.LOST


def test_leak_at_a_given_rate_on_a_busy_gpu() -> None:
    backend = SimulatedBackend(scenario=Scenario((
        ScenarioEvent(1, 0, "leak", 100.0, (("busy", 1.0),)),)))  # fmt: skip
    readings = [r[0] for r in advance(backend, 3600, step_s=60)]
    grown = readings[-1][m.MEM_USED_BYTES] - readings[0][m.MEM_USED_BYTES]
    assert grown == pytest.approx(59 * 100 * MIB, rel=0.01)  # 100 MiB a minute for 59 minutes
    assert readings[-1][m.UTIL_GPU_PCT] > 80


def test_weight_load_steps_up_then_stays_flat_on_a_busy_gpu() -> None:
    backend = SimulatedBackend(scenario=scenario((5, 0, "weight_load", 20.0)))
    used = [r[0][m.MEM_USED_BYTES] for r in run(backend, 200)]
    loaded = used[60]
    assert used[60:] == [loaded] * len(used[60:])  # flat once loaded
    assert loaded - used[0] >= 20 * GIB
    steps = [b - a for a, b in itertools.pairwise(used[:60]) if b != a]
    assert len(steps) >= 7  # shard by shard, not all at once
    assert backend.read_gpus()[0][m.UTIL_GPU_PCT] > 80


def test_alloc_free_is_a_sawtooth() -> None:
    backend = SimulatedBackend(scenario=Scenario((
        ScenarioEvent(1, 0, "alloc_free", 8.0, (("period_s", 100.0),)),)))  # fmt: skip
    used = [r[0][m.MEM_USED_BYTES] for r in run(backend, 400)]
    drops = [a - b for a, b in itertools.pairwise(used) if b < a]
    assert len(drops) >= 3 and min(drops) > 6 * GIB  # frees it all, every period
    assert max(used) - min(used[5:]) > 6 * GIB


def test_advance_runs_faster_than_real_time_and_deterministically() -> None:
    first, second = SimulatedBackend(seed=5), SimulatedBackend(seed=5)
    assert advance(first, 3600, step_s=30) == advance(second, 3600, step_s=30)
    assert first.sim_time_s == 3600.0
    with pytest.raises(ValueError, match="dt_s must be > 0"):
        first.advance(0.0)


def test_load_phases_change_as_often_at_any_step() -> None:
    def phase_changes(step_s: float, load_phase_s: float) -> int:
        backend = SimulatedBackend(gpu_count=8, seed=2, load_phase_s=load_phase_s)
        utils = [[r[m.UTIL_GPU_PCT] for r in rs] for rs in advance(backend, 6 * 3600, step_s)]
        return sum(abs(b - a) > 5 for col in zip(*utils, strict=True)
                   for a, b in itertools.pairwise(col))  # fmt: skip

    lively, calm = phase_changes(10.0, 100.0), phase_changes(10.0, 1800.0)
    assert calm < lively / 5  # a new phase every 100 s, against every 30 min
    assert phase_changes(60.0, 1800.0) == pytest.approx(calm, rel=0.6)  # per time, not per step
    with pytest.raises(ValueError, match="load_phase_s must be > 0"):
        SimulatedBackend(load_phase_s=0)
