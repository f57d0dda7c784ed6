"""GetStateAt (#30): the node as it was at a moment, against real daemons over loopback.

A simulated GPU heats to a critical alert, which is acknowledged; a GPU is reserved,
drained and released. For moments between those steps, the answer's readings are
QueryHistory's raw point at the moment, its alerts those the journal (replayed through
StreamEvents and folded here) says were firing, its reservations and drains those then
in force. Hostile moments and a history seeded in the past (its older tiers, damaged
rows) follow; the clock-step rule and an older journal are checked on the journal itself.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.backends.simulated import SimulatedBackend
from node_daemon.backends.simulated.scenario import Scenario, ScenarioEvent
from node_daemon.history.settings import HistorySettings
from tests.conftest import DaemonFactory, wait_for
from tests.node_daemon.journal import events_after
from tests.node_daemon.test_history_damage import damage
from tests.node_daemon.test_history_rpc import HOUR_MS, seed

# GPU 1 busy, then its cooling fails after 8 samples of 5 s of simulated time: it passes
# 85 °C within a few seconds of the test, after a few samples of it below.
HEAT = Scenario((ScenarioEvent(0.2, 1, "load", 100.0), ScenarioEvent(40, 1, "overheat")))


def now_ms() -> int:
    return int(time.time() * 1000)


def a_moment() -> int:
    """Now, once the clock has moved on from it: what the test does next is stamped later."""
    moment = now_ms()
    wait_for(lambda: now_ms() > moment, what="the clock to pass a millisecond")
    return moment


def state_at(node: pb_grpc.NodeServiceStub, at_ms: int) -> pb.NodeStateAt:
    return node.GetStateAt(pb.GetStateAtRequest(at_unix_ms=at_ms), timeout=10)


def raw_point(node: pb_grpc.NodeServiceStub, at_ms: int, gpu: int) -> tuple[int, float]:
    """QueryHistory's newest raw point of GPU `gpu` at or before the moment: (time, temp)."""
    answer = node.QueryHistory(
        pb.QueryHistoryRequest(start_unix_ms=at_ms - 1500, end_unix_ms=at_ms,
                               metrics=["temp_gpu_c"], gpu_indices=[gpu]), timeout=10,
    )  # fmt: skip
    assert answer.tier == "raw" and answer.timestamps_unix_ms
    return answer.timestamps_unix_ms[-1], answer.series[0].values[-1]


def journal_firing(node: pb_grpc.NodeServiceStub, at_ms: int) -> dict[str, pb.Alert]:
    """The alerts firing at the moment by the node's journal (firing_in its events)."""
    return firing_in(events_after(node), at_ms)


def firing_in(events: list[pb.Event], at_ms: int) -> dict[str, pb.Alert]:
    """The alerts firing at the moment by these journal events, folded here event by
    event: each alert's latest event stamped at or before it."""
    latest: dict[str, pb.Alert] = {}
    for event in events:
        if event.HasField("alert") and event.time_unix_ms <= at_ms:
            latest[event.alert.id] = event.alert
    return {i: a for i, a in latest.items() if a.state == pb.ALERT_STATE_FIRING}


@dataclass
class Incident:
    node: pb_grpc.NodeServiceStub
    moments: dict[str, int]
    alert_id: str
    reservation_id: str


@pytest.fixture
def incident(start_daemon: DaemonFactory) -> Iterator[Incident]:
    """One short incident, its moments named: before, hot, acked, reserved, drained, released."""
    backend = SimulatedBackend(gpu_count=2, scenario=HEAT, step_s=5.0)
    daemon = start_daemon(backend=backend, history=HistorySettings(flush_interval_s=0.5))
    with grpc.insecure_channel(str(daemon.address)) as channel:
        yield _play(pb_grpc.NodeServiceStub(channel))


def hot_alert(node: pb_grpc.NodeServiceStub, include_cleared: bool = False) -> pb.Alert | None:
    """GPU 1's temperature alert, the one the heating scenarios raise (a warning, then
    critical in place; with `include_cleared`, also once it has cleared)."""
    request = pb.ListAlertsRequest(include_cleared=include_cleared)
    alerts = node.ListAlerts(request, timeout=5).alerts
    return next((a for a in alerts if a.rule == "gpu_temp" and a.gpu_index == 1), None)


def critical_alert(node: pb_grpc.NodeServiceStub) -> pb.Alert | None:
    """GPU 1's temperature alert while it fires at critical."""
    alert = hot_alert(node)
    return alert if alert is not None and alert.severity == pb.SEVERITY_CRITICAL else None


def _sampled_since(node: pb_grpc.NodeServiceStub, since_ms: int) -> bool:
    answer = node.QueryHistory(
        pb.QueryHistoryRequest(start_unix_ms=since_ms, metrics=["temp_gpu_c"]), timeout=5
    )
    return len(answer.timestamps_unix_ms) >= 3


def _play(node: pb_grpc.NodeServiceStub) -> Incident:
    wait_for(lambda: critical_alert(node) is not None, 30, "GPU 1's critical temperature alert")
    moments = {"hot": a_moment()}
    alert = critical_alert(node)
    assert alert is not None
    moments["before"] = alert.started_unix_ms - 1  # sampled since the start, not yet critical
    node.AcknowledgeAlert(pb.AcknowledgeAlertRequest(alert_id=alert.id, comment="fan"), timeout=5)
    moments["acked"] = a_moment()
    until = now_ms() + HOUR_MS
    made = node.Reserve(pb.ReserveRequest(gpu_indices=[0], holder="alice", until_unix_ms=until,
                                          reason="incident"), timeout=5)  # fmt: skip
    moments["reserved"] = a_moment()
    node.DrainGpu(pb.DrainGpuRequest(gpu_index=1, drain=True, reason="too hot"), timeout=5)
    moments["drained"] = a_moment()
    node.ReleaseReservation(pb.ReleaseReservationRequest(reservation_id=made.id), timeout=5)
    moments["released"] = a_moment()
    return Incident(node, moments, alert.id, made.id)


def test_an_incident_moment_by_moment(incident: Incident) -> None:
    """Readings as the raw tier has them, alerts as the journal has them, reservations and
    drains as they were, at each of six moments."""
    readings_are_the_raw_tier_s_points(incident)
    alerts_are_those_the_journal_says_fired(incident)
    reservations_and_drains_are_those_in_force(incident)


def readings_are_the_raw_tier_s_points(incident: Incident) -> None:
    for name, at_ms in incident.moments.items():
        answer = state_at(incident.node, at_ms)
        assert (answer.tier, answer.step_ms, answer.history_reaches) == ("raw", 100, True), name
        assert [g.index for g in answer.gpus] == [0, 1]
        for gpu in answer.gpus:
            stamp, temp = raw_point(incident.node, at_ms, gpu.index)
            assert gpu.sample_unix_ms == stamp <= at_ms, name
            assert at_ms - stamp < 2000  # near: the daemon samples every 100 ms
            assert gpu.sample.temp_gpu_c == temp, name  # the same float32, not a neighbour's
            assert gpu.sample.HasField("power_w") and not gpu.HasField("peak")
    hot = state_at(incident.node, incident.moments["hot"]).gpus[1].sample.temp_gpu_c
    assert hot >= 85.0


def alerts_are_those_the_journal_says_fired(incident: Incident) -> None:
    for name, at_ms in incident.moments.items():
        answer = state_at(incident.node, at_ms)
        expected = journal_firing(incident.node, at_ms)
        assert {a.id: a for a in answer.alerts} == expected, name
    before = state_at(incident.node, incident.moments["before"])
    assert incident.alert_id not in {a.id for a in before.alerts}
    hot = {a.id: a for a in state_at(incident.node, incident.moments["hot"]).alerts}
    assert hot[incident.alert_id].severity == pb.SEVERITY_CRITICAL
    assert not hot[incident.alert_id].acknowledged_by  # not yet
    acked = {a.id: a for a in state_at(incident.node, incident.moments["acked"]).alerts}
    assert acked[incident.alert_id].acknowledge_comment == "fan"
    assert acked[incident.alert_id].acknowledged_unix_ms <= incident.moments["acked"]


def reservations_and_drains_are_those_in_force(incident: Incident) -> None:
    def held(name: str) -> list[tuple[str, list[int]]]:
        answer = state_at(incident.node, incident.moments[name])
        return [(r.id, list(r.gpu_indices)) for r in answer.reservations]

    def drained(name: str) -> list[int]:
        answer = state_at(incident.node, incident.moments[name])
        return [g.index for g in answer.gpus if g.sample.condition.drained]

    assert held("acked") == []
    assert held("reserved") == held("drained") == [(incident.reservation_id, [0])]
    assert held("released") == []
    assert drained("reserved") == []
    assert drained("drained") == drained("released") == [1]
    # Sampled and no change journalled before: healthy then, not "not known".
    before = state_at(incident.node, incident.moments["reserved"]).gpus[0].sample.condition
    assert (before.gpu_index, before.state) == (0, pb.GPU_HEALTH_STATE_HEALTHY)
    drain = state_at(incident.node, incident.moments["drained"]).gpus[1].sample.condition
    assert drain.drain_reason == "too hot"


@pytest.fixture
def calm(start_daemon: DaemonFactory) -> Iterator[pb_grpc.NodeServiceStub]:
    daemon = start_daemon(gpus=2)
    with grpc.insecure_channel(str(daemon.address)) as channel:
        node = pb_grpc.NodeServiceStub(channel)
        started = now_ms()
        wait_for(lambda: _sampled_since(node, started), what="a few samples on disk")
        yield node


def test_hostile_moments_get_clear_errors(calm: pb_grpc.NodeServiceStub) -> None:
    for at_ms in (0, -5, -(2**63)):
        with pytest.raises(grpc.RpcError) as info:
            state_at(calm, at_ms)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "Unix time in ms" in info.value.details()
    for at_ms in (now_ms() + HOUR_MS, 2**63 - 1):  # an hour ahead, the largest int64
        with pytest.raises(grpc.RpcError) as info:
            state_at(calm, at_ms)
        assert info.value.code() == grpc.StatusCode.OUT_OF_RANGE
        assert "not known yet" in info.value.details()
    soon = state_at(calm, now_ms() + 1000)  # within the slack: now
    assert soon.history_reaches and all(g.HasField("sample_unix_ms") for g in soon.gpus)


def test_a_moment_before_the_history_answers_the_journal_and_says_so(
    calm: pb_grpc.NodeServiceStub,
) -> None:
    answer = state_at(calm, now_ms() - 30 * 86_400_000)
    assert not answer.history_reaches and answer.tier == "" and answer.step_ms == 0
    assert "reaches back to" in answer.note
    assert [g.index for g in answer.gpus] == [0, 1]
    assert not any(g.HasField("sample_unix_ms") or g.sample.HasField("temp_gpu_c")
                   for g in answer.gpus)  # fmt: skip
    assert not answer.alerts and not answer.reservations


# -- a history seeded in the past: its coarser tiers, and damage near a moment -----------


def steps_temp(at_ms: int) -> float:
    """A value of each 10 s step: 40 .. 49 by the step's place in its 100 s."""
    return 40.0 + (at_ms // 10_000) % 10


@pytest.fixture
def seeded(tmp_path: Path) -> Path:
    """Three hours of 2 GPUs at 1 s, the last ending a minute ago (raw holds the last hour)."""
    state = tmp_path / "state"
    end = now_ms() // 1000 * 1000 - 60_000  # ticks on whole seconds
    seed(state, end - 3 * HOUR_MS, end, 1000, steps_temp)
    return state


def test_a_moment_beyond_the_raw_tier_comes_from_the_10s_tier_with_its_step(
    start_daemon: DaemonFactory, seeded: Path
) -> None:
    daemon = start_daemon(state_dir=seeded, gpus=2)
    with grpc.insecure_channel(str(daemon.address)) as channel:
        node = pb_grpc.NodeServiceStub(channel)
        at_ms = now_ms() - 2 * HOUR_MS + 3_456
        answer = state_at(node, at_ms)
        assert (answer.tier, answer.step_ms, answer.history_reaches) == ("10s", 10_000, True)
        step_start = at_ms - at_ms % 10_000
        for gpu in answer.gpus:
            assert step_start - 10_000 <= gpu.sample_unix_ms <= step_start
            assert gpu.sample.temp_gpu_c == steps_temp(gpu.sample_unix_ms)  # the step's mean
            assert gpu.peak.temp_gpu_c == steps_temp(gpu.sample_unix_ms)
        tiers = node.QueryHistory(
            pb.QueryHistoryRequest(start_unix_ms=at_ms - 20_000, end_unix_ms=at_ms,
                                   metrics=["temp_gpu_c"], gpu_indices=[0]), timeout=10,
        )  # fmt: skip
        assert tiers.tier == "10s"
        assert tiers.timestamps_unix_ms[-1] == answer.gpus[0].sample_unix_ms
        assert tiers.series[0].values[-1] == answer.gpus[0].sample.temp_gpu_c


def test_damaged_rows_near_a_moment_are_skipped_or_data_loss(
    start_daemon: DaemonFactory, seeded: Path
) -> None:
    at_ms = (now_ms() - 30 * 60_000) // 1000 * 1000  # on a raw tick of the seeded hour
    damage(seeded, [(0, at_ms)])  # the tick at the moment: the one before it answers
    damage(seeded, [(0, t) for t in range(at_ms - 600_000, at_ms - 600_000 + 3000, 1000)])
    daemon = start_daemon(state_dir=seeded, gpus=2)
    with grpc.insecure_channel(str(daemon.address)) as channel:
        node = pb_grpc.NodeServiceStub(channel)
        partly = state_at(node, at_ms)
        assert partly.tier == "raw" and "1 damaged history rows" in partly.note
        assert {g.sample_unix_ms for g in partly.gpus} == {at_ms - 1000}
        with pytest.raises(grpc.RpcError) as info:  # every row within 2 s of it damaged
            state_at(node, at_ms - 600_000 + 2000)
        assert info.value.code() == grpc.StatusCode.DATA_LOSS
        assert "cannot be decoded" in info.value.details()
        assert state_at(node, at_ms - 900_000).gpus[0].HasField("sample_unix_ms")
