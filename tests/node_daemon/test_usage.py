"""Usage accounting, acceptance: a known load gives the expected GPU-hours and energy.

No real waiting: the meter is fed sweeps with timestamps of a controlled clock.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence

import pytest

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1.gpu_metrics import POWER_W
from node_daemon.backends.readings import GpuReading, ProcessReading
from node_daemon.backends.simulated import Scenario, SimulatedBackend
from node_daemon.backends.simulated.scenario import ScenarioEvent
from node_daemon.usage.amounts import GIB
from node_daemon.usage.meter import UsageMeter
from node_daemon.usage.query import query_usage
from node_daemon.usage.store import UsageStore
from tests.node_daemon.usage_fixtures import empty_usage_store  # noqa: F401 (the `store` fixture)

# 2024-06-03 08:00:00 UTC: the whole scenario lies within one UTC day.
T0 = dt.datetime(2024, 6, 3, 8, tzinfo=dt.UTC).timestamp()
DAY = "2024-06-03"
STEP_S = 3.0  # with 3 s steps the simulated utilisation reaches its target in one step


def gpu(index: int, util: float | None = 100.0, power: float | None = 300.0) -> GpuReading:
    return GpuReading(index=index, util_gpu_pct=util, power_w=power)


def proc(pid: int, user: str | None, memory_gib: float = 1.0) -> ProcessReading:
    return ProcessReading(pid=pid, user=user, gpu_memory_bytes=int(memory_gib * GIB))


def no_reservations(_gpu: int) -> str | None:
    return None


def report(
    store: UsageStore, by: int = pb.USAGE_GROUPING_USER, **request: str
) -> pb.QueryUsageResponse:
    query = pb.QueryUsageRequest(group_by=by, **request)
    return query_usage(store, [], lambda _u: (), query, "node-a", dt.date(2024, 6, 30))


def rows(response: pb.QueryUsageResponse) -> dict[str, pb.UsageRow]:
    return {row.key: row for row in response.rows}


def test_hand_built_load_gives_the_expected_hours_and_energy(store: UsageStore) -> None:
    """alice: GPU 0, 3600 s at 100 % and 400 W; bob: GPU 1, 1800 s at 50 % and 200 W."""
    meter = UsageMeter(store, sample_interval_s=1.0)
    for second in range(3601):
        readings = [gpu(0, 100.0, 400.0), gpu(1, 50.0 if second <= 1800 else 0.0, 200.0)]
        processes: dict[int, list[ProcessReading]] = {0: [proc(10, "alice", 8.0)]}
        processes[1] = [proc(11, "bob", 4.0)] if second <= 1800 else []
        meter.observe(T0 + second, readings, processes, no_reservations)
    meter.close()

    users = rows(report(store))
    alice, bob = users["alice"], users["bob"]
    assert alice.gpu_seconds / 3600 == pytest.approx(1.0, rel=0.01)
    assert bob.gpu_seconds / 3600 == pytest.approx(0.5, rel=0.01)
    assert alice.busy_gpu_seconds / 3600 == pytest.approx(1.0, rel=0.01)
    assert bob.busy_gpu_seconds / 3600 == pytest.approx(0.25, rel=0.01)
    assert alice.energy_joules == pytest.approx(400.0 * 3600, rel=0.01)
    assert bob.energy_joules == pytest.approx(200.0 * 1800, rel=0.01)
    assert alice.memory_gib_seconds == pytest.approx(8.0 * 3600, rel=0.01)
    assert bob.memory_gib_seconds == pytest.approx(4.0 * 1800, rel=0.01)


def _drive(
    backend: SimulatedBackend, meter: UsageMeter, sweeps: int, bob_leaves_after: int
) -> dict[str, float]:
    """Sweep the backend like the sampler does; return each user's Σ power·dt as billed."""
    expected = {"alice": 0.0, "bob": 0.0}
    for k in range(sweeps + 1):
        if k == bob_leaves_after + 1:
            backend.detach_process(2002)
        readings = backend.read_gpus()
        processes = backend.read_processes()
        meter.observe(T0 + k * STEP_S, readings, processes, no_reservations)
        if k == 0:
            continue  # the first sweep only starts the clock
        for reading in readings:
            for process in processes[reading.index]:
                expected[process.user or ""] += (reading[POWER_W] or 0.0) * STEP_S
    return expected


def test_simulated_scenario_report_matches_known_load_within_one_percent(store: UsageStore) -> None:
    """The acceptance test: two users with known durations and load on the simulated backend."""
    scenario = Scenario((
        ScenarioEvent(1.0, 0, "load", 100.0),
        ScenarioEvent(1.0, 1, "load", 50.0),
        ScenarioEvent(1801.0 + STEP_S, 1, "load", 0.0),  # bob's GPU goes quiet when he leaves
    ))  # fmt: skip
    # Seed 5 starts both GPUs idle with no processes of the simulator's own.
    backend = SimulatedBackend(gpu_count=2, seed=5, model="h100", scenario=scenario, step_s=STEP_S)
    backend.open()
    backend.attach_process(0, 2001, "alice", "python train.py", 8 * GIB, 0)
    backend.attach_process(1, 2002, "bob", "python eval.py", 4 * GIB, 0)
    meter = UsageMeter(store, sample_interval_s=STEP_S)
    billed_energy = _drive(backend, meter, sweeps=1200, bob_leaves_after=600)
    meter.close()

    response = report(store)
    users = rows(response)
    assert set(users) == {"alice", "bob"}
    alice, bob = users["alice"], users["bob"]
    assert alice.gpu_seconds / 3600 == pytest.approx(1.0, rel=0.01)
    assert bob.gpu_seconds / 3600 == pytest.approx(0.5, rel=0.01)
    assert alice.busy_gpu_seconds / 3600 == pytest.approx(1.0, rel=0.01)
    assert bob.busy_gpu_seconds / 3600 == pytest.approx(0.25, rel=0.01)
    # Energy: what the GPUs reported, and what the H100's power model says for the load
    # (idle 70 W + (700 - 70) W x utilisation).
    assert alice.energy_joules == pytest.approx(billed_energy["alice"], rel=0.01)
    assert bob.energy_joules == pytest.approx(billed_energy["bob"], rel=0.01)
    assert alice.energy_joules == pytest.approx(700.0 * 3600, rel=0.01)
    assert bob.energy_joules == pytest.approx((70.0 + 630.0 * 0.5) * 1800, rel=0.01)
    assert alice.memory_gib_seconds == pytest.approx(8 * 3600, rel=0.01)
    # Two GPUs for an hour, busy 3600 s x 100 % + 1800 s x 50 %: 62.5 % mean utilisation.
    assert response.kpis.gpu_seconds_total == pytest.approx(7200, rel=0.01)
    assert response.kpis.mean_utilisation_pct == pytest.approx(62.5, rel=0.01)
    by_day = rows(report(store, pb.USAGE_GROUPING_DAY))
    assert by_day[DAY].gpu_seconds == pytest.approx(5400, rel=0.01)


def test_observe_accepts_the_samplers_mappings(store: UsageStore) -> None:
    """The sampler passes Mapping[int, Sequence[ProcessReading]]; tuples work too."""
    meter = UsageMeter(store, sample_interval_s=1.0)
    processes: Mapping[int, Sequence[ProcessReading]] = {0: (proc(1, "alice"),)}
    meter.observe(T0, (gpu(0),), processes, no_reservations)
    meter.observe(T0 + 1, (gpu(0),), processes, no_reservations)
    meter.close()
    assert rows(report(store))["alice"].gpu_seconds == pytest.approx(1.0)
