"""The memory leak rule against an hour of synthetic GPU memory, one reading a second.

Each series goes through the real detector as the engine feeds it (GpuTick,
GpuReading, ProcessReading); the numbers (100 MiB/min, a 20 GiB weight load,
sawtooth allocation) are those of issue #15. The detection delays asserted here
are the algorithm's (minutes of simulated time), not a timing of the machine.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpufleet.v1.alert_severity import Severity
from node_daemon.alerts.engine import AlertEngine
from node_daemon.alerts.findings import Finding, GpuTick
from node_daemon.alerts.occurrence_detectors import LeakDetector
from node_daemon.alerts.rules import AlertSettings, LeakSettings, parse_alert_settings
from node_daemon.backends.readings import GpuReading, GpuStatic, ProcessReading
from node_daemon.backends.simulated import SimulatedBackend
from node_daemon.backends.simulated.scenario import Scenario, scenario_event
from node_daemon.errors import ConfigError
from node_daemon.journal.event_journal import EventJournal

MIB, GIB = 1024**2, 1024**3
TOTAL = 80 * GIB
H100 = GpuStatic(index=3, uuid="GPU-3", name="NVIDIA H100 80GB HBM3", memory_total_bytes=TOTAL)
BASE = 2 * GIB  # the process's memory when it starts
Memory = Callable[[float], float]  # seconds since start -> bytes


@dataclass
class Run:
    findings: list[tuple[float, Finding]]  # (minute, the process's finding) at each tick

    @property
    def first_minute(self) -> float | None:
        return self.findings[0][0] if self.findings else None

    @property
    def flagged_minutes(self) -> float:
        return len(self.findings) / 60


def run(
    memory: Memory,
    minutes: float = 60,
    util: float = 0.0,
    pid: Callable[[float], int] = lambda _t: 4242,
    settings: LeakSettings | None = None,
    others_b: int = 0,
) -> Run:
    """Feed `memory(t)` for one process, one tick a second; what the detector said when."""
    detector = LeakDetector(settings or LeakSettings())
    found: list[tuple[float, Finding]] = []
    for second in range(int(minutes * 60)):
        held = int(memory(second))
        process = ProcessReading(pid=pid(second), gpu_memory_bytes=held, user="bob",
                                 command="python serve.py",
                                 start_time_unix_ms=pid(second))  # fmt: skip
        reading = GpuReading(index=3, util_gpu_pct=util, mem_used_bytes=held + others_b,
                             mem_total_bytes=TOTAL)  # fmt: skip
        tick = GpuTick(float(second), reading, H100, (process,))
        found += [(second / 60, f) for f in detector.evaluate(tick)]
    return Run(found)


def leak(mib_per_min: float, after_s: float = 0) -> Memory:
    return lambda t: BASE + max(0.0, t - after_s) * mib_per_min * MIB / 60


def test_a_100_mib_per_min_leak_on_an_idle_gpu_is_caught_in_its_first_11_minutes() -> None:
    result = run(leak(100))
    # Detection delay: the growth must last min_duration_s (10 min), then the bucket closes.
    assert result.first_minute is not None and 10 <= result.first_minute <= 11
    _minute, first = result.findings[0]
    assert first.rule == "memory_leak" and first.key == "memory_leak/gpu3/pid4242"
    assert first.pid == 4242 and first.unit == "MiB/min" and first.value == pytest.approx(100, 1)
    assert first.severity is Severity.WARNING  # the GPU is full in 13 h: no page yet
    assert first.summary == (
        "GPU 3: process 4242 (bob: python serve.py) has been leaking GPU memory for 10 min "
        "(+1.0 GiB); at 100 MiB/min GPU 3 is full in 13 h 8 min"
    ), first.summary
    # Found once, it holds to the end of the hour.
    assert result.findings[-1][0] == pytest.approx(60, abs=0.02)
    assert result.flagged_minutes >= 49


def test_a_leak_on_a_95_percent_busy_gpu_under_sawtooth_allocations_is_caught_too() -> None:
    def busy(t: float) -> float:  # a 20 s allocate/free cycle of 3 GiB riding on the leak
        return leak(100)(t) + (t % 20) / 20 * 3 * GIB

    result = run(busy, util=95.0)
    assert result.first_minute is not None and 10 <= result.first_minute <= 11
    assert result.findings[-1][1].value == pytest.approx(100, rel=0.05)


def test_a_leak_that_starts_after_half_an_hour_is_caught_within_11_minutes_of_its_start() -> None:
    result = run(leak(100, after_s=1800))
    assert result.first_minute is not None and 30 < result.first_minute <= 41


def test_twenty_gib_of_weights_loading_then_held_is_never_a_leak() -> None:
    for load_s in (30, 120, 300, 480):  # from NVMe to a slow network file system

        def weights(t: float, load_s: float = load_s) -> float:
            return BASE + min(t / load_s, 1.0) * 20 * GIB

        assert run(weights).findings == [], f"a {load_s} s load flagged"


def test_allocating_and_freeing_around_a_flat_baseline_is_never_a_leak() -> None:
    for period_s, height in ((20, 3 * GIB), (90, 4 * GIB), (300, 6 * GIB)):

        def sawtooth(t: float, period_s: float = period_s, height: float = height) -> float:
            return BASE + (t % period_s) / period_s * height

        assert run(sawtooth, util=80.0).findings == [], f"a {period_s} s sawtooth flagged"


def test_a_slow_sawtooth_out_of_step_with_the_buckets_is_never_a_leak() -> None:
    """The replay benchmark's case: 8.6 GiB every 423 s beats against the 30 s buckets,
    so the lows climb for a while before each free; they fall by all they grew."""

    def sawtooth(t: float) -> float:
        return BASE + (t % 423) / 423 * 8.6 * GIB

    assert run(sawtooth, minutes=120, util=95.0).findings == []


def test_slow_fragmentation_below_the_minimum_rate_is_never_a_leak() -> None:
    # 10 MiB/min grows 600 MiB in the hour (over min_growth_mib), at under a third of the rate.
    assert run(leak(10)).findings == []
    assert run(leak(30)).findings == []  # just under the default 32 MiB/min


def test_a_cache_warming_up_to_its_plateau_is_no_leak() -> None:
    def warming(t: float) -> float:
        return BASE + 4 * GIB * (1 - math.exp(-t / 300))

    assert run(warming).findings == []


def test_a_restarted_process_starts_a_new_series() -> None:
    # Restarted every 8 minutes (a new pid), each life leaking 100 MiB/min: no life lasts
    # the 10 minutes a leak must, and no life inherits the one before.
    def restarting(t: float) -> float:
        return BASE + (t % 480) * 100 * MIB / 60

    result = run(restarting, pid=lambda t: 4242 + int(t // 480))
    assert result.findings == []


def test_a_reused_pid_with_another_start_time_is_another_process() -> None:
    # The same pid, started anew every 8 minutes: the series resets as for a new pid.
    starts = {"now": 0}

    def memory(t: float) -> float:
        return BASE + (t % 480) * 100 * MIB / 60

    def same_pid(t: float) -> int:
        starts["now"] = int(t // 480)
        return 4242

    detector = LeakDetector(LeakSettings())
    found = []
    for second in range(3600):
        process = ProcessReading(pid=same_pid(second), gpu_memory_bytes=int(memory(second)),
                                 start_time_unix_ms=1_000 + starts["now"])  # fmt: skip
        reading = GpuReading(index=3, mem_used_bytes=int(memory(second)), mem_total_bytes=TOTAL)
        found += list(detector.evaluate(GpuTick(float(second), reading, H100, (process,))))
    assert found == []


def test_a_leak_that_fills_the_gpu_soon_is_critical_and_says_when() -> None:
    # 1 GiB/min, 60 GiB held by others: 7.5 GiB free at minute 10.5, full 8 min later.
    result = run(leak(1024), minutes=14, others_b=60 * GIB)
    assert result.first_minute is not None and result.first_minute <= 11
    _minute, first = result.findings[0]
    assert first.severity is Severity.CRITICAL
    assert "at 1,024 MiB/min GPU 3 is full in 8 min" in first.summary, first.summary


def test_a_leak_stops_being_one_when_the_memory_is_given_back() -> None:
    def fixed(t: float) -> float:  # leaks for 20 min, then frees it all and holds flat
        return leak(100)(t) if t < 1200 else BASE

    result = run(fixed, minutes=40)
    assert result.first_minute is not None and result.findings[-1][0] < 21


def test_without_free_memory_the_summary_says_it_is_unknown() -> None:
    detector = LeakDetector(LeakSettings())
    found: list[Finding] = []
    for second in range(700):
        process = ProcessReading(pid=7, gpu_memory_bytes=int(leak(100)(second)))
        tick = GpuTick(float(second), GpuReading(index=0), None, (process,))
        found = list(detector.evaluate(tick))
    assert found and found[0].summary.endswith("at 100 MiB/min; GPU 0's free memory is unknown")


def test_a_disabled_rule_finds_nothing() -> None:
    assert run(leak(500), minutes=15, settings=LeakSettings(enabled=False)).findings == []


def test_the_series_is_bounded_by_the_history() -> None:
    detector = LeakDetector(LeakSettings(history_s=1200, min_duration_s=600))
    for second in range(0, 7200, 5):
        process = ProcessReading(pid=1, gpu_memory_bytes=BASE + second)
        list(detector.evaluate(GpuTick(float(second), GpuReading(index=0), None, (process,))))
    (series,) = detector._series.values()  # what one process costs, two hours on
    assert len(series.points) <= 1200 / 30 + 1


def test_old_configs_with_the_fixed_window_keys_still_load(
    caplog: pytest.LogCaptureFixture,
) -> None:
    table = {"memory_leak": {"window_s": 120, "min_growth_mib": 256, "max_util_pct": 10}}
    with caplog.at_level(logging.WARNING):
        settings = parse_alert_settings(table, "daemon.toml")
    assert settings.memory_leak == LeakSettings(min_growth_mib=256)
    assert "alerts.memory_leak.window_s: ignored" in caplog.text
    assert "alerts.memory_leak.max_util_pct: ignored" in caplog.text


def test_new_keys_load_and_nonsense_is_refused_by_name() -> None:
    table = {"memory_leak": {"min_rate_mib_per_min": 64, "critical_within_s": 900}}
    settings = parse_alert_settings(table, "daemon.toml").memory_leak
    assert (settings.min_rate_mib_per_min, settings.critical_within_s) == (64, 900)
    assert AlertSettings().memory_leak.history_s == 3600
    with pytest.raises(ConfigError, match="steady_fraction"):
        parse_alert_settings({"memory_leak": {"steady_fraction": 1.5}}, "daemon.toml")
    with pytest.raises(ConfigError, match="min_duration_s must span at least 6 buckets"):
        parse_alert_settings({"memory_leak": {"bucket_s": 200}}, "daemon.toml")
    with pytest.raises(ConfigError, match="history_s"):
        parse_alert_settings({"memory_leak": {"history_s": 300}}, "daemon.toml")
    with pytest.raises(ConfigError, match="unknown key 'window'"):
        parse_alert_settings({"memory_leak": {"window": 3}}, "daemon.toml")


def test_the_simulated_nodes_leaks_raise_alerts_and_its_loads_and_sawtooths_do_not(
    tmp_path: Path,
) -> None:
    """The simulator's memory shapes through the whole alert engine, for 40 minutes."""
    scenario = Scenario((
        scenario_event(60, 0, "leak", rate_mib_per_min=100, busy=True),
        scenario_event(60, 1, "weight_load", gib=20),
        scenario_event(60, 2, "alloc_free", gib=8, period_s=300, busy=True),
        scenario_event(60, 3, "leak", rate_mib_per_min=100),
    ))  # fmt: skip
    backend = SimulatedBackend(gpu_count=4, seed=5, model="h100", scenario=scenario)
    clock = [1_800_000_000.0]
    journal = EventJournal(tmp_path / "journal.sqlite3")
    engine = AlertEngine(journal, clock=lambda: clock[0])
    engine.set_gpu_facts(backend.open().gpus)
    raised: dict[int, float] = {}
    for second in range(40 * 60):
        clock[0] += 1.0
        engine.evaluate(backend.read_gpus(), backend.read_processes())
        for alert in engine.firing():
            if alert.rule == "memory_leak" and alert.gpu_index is not None:
                raised.setdefault(alert.gpu_index, second / 60)
    journal.close()
    assert set(raised) == {0, 3}, raised  # the weight load and the sawtooth never
    assert all(10 <= minute - 1 <= 12 for minute in raised.values()), raised
