"""UsageMeter: attribution rules, reservations, day boundaries, flushing and restarts."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from gpufleet.v1 import node_pb2 as pb
from node_daemon.backends.readings import GpuHealth, GpuReading, ProcessReading
from node_daemon.usage.meter import UNKNOWN_USER, UsageMeter, day_parts
from node_daemon.usage.store import USAGE_FILE, UsageStore, UsageStoreError
from tests.node_daemon.test_usage import T0, gpu, no_reservations, proc, report, rows
from tests.node_daemon.usage_fixtures import empty_usage_store  # noqa: F401 (the `store` fixture)


def run(
    meter: UsageMeter,
    seconds: int,
    readings: list[GpuReading],
    processes: dict[int, list[ProcessReading]],
    reserved: dict[int, str] | None = None,
    start: float = T0,
) -> None:
    """One sweep per second for `seconds` seconds (plus the sweep that starts the clock)."""
    held = reserved or {}
    for second in range(seconds + 1):
        meter.observe(start + second, readings, processes, held.get)


def test_processes_share_a_gpu_equally(store: UsageStore) -> None:
    meter = UsageMeter(store, 1.0)
    processes = {0: [proc(1, "alice", 2.0), proc(2, "bob", 6.0), proc(3, "bob", 1.0)]}
    run(meter, 30, [gpu(0, util=60.0, power=300.0)], processes)
    meter.close()
    users = rows(report(store))
    assert users["alice"].gpu_seconds == pytest.approx(10.0)
    assert users["bob"].gpu_seconds == pytest.approx(20.0)
    assert users["alice"].busy_gpu_seconds == pytest.approx(6.0)
    assert users["alice"].energy_joules == pytest.approx(300.0 * 10)
    # Memory is each process's own, not shared.
    assert users["alice"].memory_gib_seconds == pytest.approx(2.0 * 30)
    assert users["bob"].memory_gib_seconds == pytest.approx(7.0 * 30)


def test_unknowns_bill_nothing_for_that_quantity(store: UsageStore) -> None:
    meter = UsageMeter(store, 1.0)
    no_memory = ProcessReading(pid=1, user=None, gpu_memory_bytes=None)
    run(meter, 10, [gpu(0, util=None, power=None)], {0: [no_memory]})
    meter.close()
    unknown = rows(report(store))[UNKNOWN_USER]
    assert unknown.gpu_seconds == pytest.approx(10.0)
    assert (unknown.busy_gpu_seconds, unknown.energy_joules, unknown.memory_gib_seconds) == (
        0,
        0,
        0,
    )
    # A GPU without a utilisation reading is left out of the node's KPIs.
    assert report(store).kpis.gpu_seconds_total == 0


def test_a_lost_gpu_is_billed_to_nobody(store: UsageStore) -> None:
    meter = UsageMeter(store, 1.0)
    lost = GpuReading(index=0, health=GpuHealth.LOST)
    run(meter, 10, [lost], {0: [proc(1, "alice")]}, reserved={0: "bob"})
    meter.close()
    assert not report(store).rows


def test_a_pause_is_not_billed_beyond_three_intervals(store: UsageStore) -> None:
    meter = UsageMeter(store, sample_interval_s=2.0)
    processes = {0: [proc(1, "alice")]}
    meter.observe(T0, [gpu(0)], processes, no_reservations)
    meter.observe(T0 + 2, [gpu(0)], processes, no_reservations)
    meter.observe(T0 + 600, [gpu(0)], processes, no_reservations)  # the daemon was stopped
    meter.observe(T0 + 599, [gpu(0)], processes, no_reservations)  # the clock stepped back
    meter.close()
    assert rows(report(store))["alice"].gpu_seconds == pytest.approx(2.0 + 6.0)


def test_reservation_time_and_idle_reservation(store: UsageStore) -> None:
    meter = UsageMeter(store, 1.0, teams_of=lambda user: ("team:ml",) if user == "carol" else ())
    readings = [gpu(0, util=80.0), gpu(1, util=80.0), gpu(2, util=2.0), gpu(3, util=80.0)]
    processes = {
        0: [proc(1, "alice")],  # alice uses her reservation
        1: [proc(2, "bob")],  # alice's reservation, but only bob works on it
        2: [proc(3, "alice")],  # alice's process, but the GPU idles
        3: [proc(4, "carol")],  # a team member uses the team's reservation
    }
    reserved = {0: "alice", 1: "alice", 2: "alice", 3: "team:ml"}
    run(meter, 100, readings, processes, reserved)
    meter.close()
    users = rows(report(store))
    assert users["alice"].reserved_seconds == pytest.approx(300.0)
    assert users["alice"].reserved_idle_seconds == pytest.approx(200.0)
    assert users["team:ml"].reserved_seconds == pytest.approx(100.0)
    assert users["team:ml"].reserved_idle_seconds == 0
    assert users["carol"].gpu_seconds == pytest.approx(100.0)


def test_node_totals_for_the_kpis(store: UsageStore) -> None:
    meter = UsageMeter(store, 1.0)
    readings = [gpu(0, util=100.0), gpu(1, util=0.0), gpu(2, util=50.0), gpu(3, util=0.0)]
    processes = {0: [proc(1, "alice")], 1: [proc(2, "bob")]}  # GPU 1: allocated but idle
    run(meter, 100, readings, processes, reserved={3: "carol"})  # GPU 3: reserved, idle
    meter.close()
    kpis = report(store).kpis
    assert kpis.gpu_seconds_total == pytest.approx(400.0)
    assert kpis.mean_utilisation_pct == pytest.approx(150 / 4)
    # Allocated or reserved: GPUs 0, 1, 3; of those 1 and 3 idle.
    assert kpis.idle_allocated_share == pytest.approx(2 / 3)


def test_usage_goes_to_the_utc_day_of_the_sample(store: UsageStore) -> None:
    meter = UsageMeter(store, 1.0)
    before_midnight = dt.datetime(2024, 5, 31, 23, 59, 50, tzinfo=dt.UTC).timestamp()
    run(meter, 20, [gpu(0)], {0: [proc(1, "alice")]}, start=before_midnight)
    meter.close()
    days = rows(report(store, pb.USAGE_GROUPING_DAY))
    assert days["2024-05-31"].gpu_seconds == pytest.approx(10.0)
    assert days["2024-06-01"].gpu_seconds == pytest.approx(10.0)
    june = rows(report(store, from_day="2024-06-01", to_day="2024-06-01"))
    assert june["alice"].gpu_seconds == pytest.approx(10.0)


def test_an_interval_ending_at_midnight_belongs_to_the_day_before() -> None:
    midnight = dt.datetime(2024, 6, 1, tzinfo=dt.UTC).timestamp()
    assert day_parts(midnight, 3.0) == [("2024-05-31", 3.0)]
    assert day_parts(midnight + 1, 3.0) == [("2024-05-31", 2.0), ("2024-06-01", 1.0)]
    assert day_parts(midnight + 5, 3.0) == [("2024-06-01", 3.0)]
    assert day_parts(midnight, 0.0) == []


def test_flushes_every_interval_so_a_crash_loses_at_most_that(tmp_path: Path) -> None:
    path = tmp_path / USAGE_FILE
    store = UsageStore(path)
    meter = UsageMeter(store, 1.0, flush_interval_s=5.0)
    run(meter, 12, [gpu(0)], {0: [proc(1, "alice")]})
    # The daemon "crashes" here: no close(). Another connection sees what was flushed.
    survivor = UsageStore(path)
    saved = rows(report(survivor))["alice"].gpu_seconds
    assert 12.0 - 5.0 <= saved <= 12.0
    survivor.close()
    store.close()


def test_usage_survives_a_restart_and_keeps_adding(tmp_path: Path) -> None:
    path = tmp_path / USAGE_FILE
    for run_number in range(2):
        store = UsageStore(path)
        meter = UsageMeter(store, 1.0)
        run(meter, 30, [gpu(0)], {0: [proc(1, "alice")]}, start=T0 + run_number * 1000)
        meter.close()
        store.close()
    store = UsageStore(path)
    assert rows(report(store))["alice"].gpu_seconds == pytest.approx(60.0)
    store.close()


class FailingOnce(UsageStore):
    """A store whose first write fails, like a full disk that is then cleaned up."""

    failed = False

    def add(self, users, node) -> None:  # type: ignore[no-untyped-def]
        if not self.failed:
            self.failed = True
            raise UsageStoreError("disk full")
        super().add(users, node)


def test_a_failed_flush_keeps_the_amounts_for_the_next(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = FailingOnce(tmp_path / USAGE_FILE)
    meter = UsageMeter(store, 1.0, flush_interval_s=5.0)
    run(meter, 20, [gpu(0)], {0: [proc(1, "alice")]})
    meter.close()
    assert "usage not saved yet" in caplog.text
    assert rows(report(store))["alice"].gpu_seconds == pytest.approx(20.0)
    store.close()


def test_observe_after_close_is_ignored(store: UsageStore) -> None:
    meter = UsageMeter(store, 1.0)
    run(meter, 5, [gpu(0)], {0: [proc(1, "alice")]})
    meter.close()
    meter.close()
    meter.observe(T0 + 6, [gpu(0)], {0: [proc(1, "alice")]}, no_reservations)
    meter.flush()
    assert rows(report(store))["alice"].gpu_seconds == pytest.approx(5.0)
