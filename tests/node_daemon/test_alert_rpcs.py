"""Alerts and events over real gRPC: list, stream, resume, acknowledge, silence, errors."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from gpufleet.policy import LOCAL_USER
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.backends.simulated import SimulatedBackend
from node_daemon.backends.simulated.scenario import Scenario, ScenarioEvent
from tests.conftest import DaemonFactory, wait_for

LOST_EARLY = Scenario((ScenarioEvent(0.2, 1, "lost"), ScenarioEvent(0.2, 0, "xid", 79.0)))


@pytest.fixture
def node(start_daemon: DaemonFactory) -> Iterator[tuple[object, pb_grpc.NodeServiceStub]]:
    daemon = start_daemon(backend=SimulatedBackend(gpu_count=2, scenario=LOST_EARLY, step_s=0.1))
    with grpc.insecure_channel(str(daemon.address)) as channel:
        yield daemon, pb_grpc.NodeServiceStub(channel)


def firing(stub: pb_grpc.NodeServiceStub) -> dict[str, pb.Alert]:
    reply = stub.ListAlerts(pb.ListAlertsRequest(), timeout=5)
    return {a.rule: a for a in reply.alerts if a.state == pb.ALERT_STATE_FIRING}


def test_list_alerts_shows_firing_alerts_with_journal_position(node) -> None:
    _, stub = node
    wait_for(lambda: {"gpu_lost", "xid"} <= set(firing(stub)), what="lost and xid alerts")
    reply = stub.ListAlerts(pb.ListAlertsRequest(), timeout=5)
    lost = next(a for a in reply.alerts if a.rule == "gpu_lost")
    assert lost.severity == pb.SEVERITY_CRITICAL and lost.gpu_index == 1
    assert lost.gpu_uuid.startswith("GPU-") and lost.id.startswith("a-")
    assert reply.last_seq >= 3 and len(reply.journal_id) == 32


def test_event_stream_replays_then_resumes_without_gaps_or_duplicates(node) -> None:
    _, stub = node
    wait_for(lambda: "gpu_lost" in firing(stub))
    stream = stub.StreamEvents(pb.StreamEventsRequest(after_seq=0), timeout=10)
    first = [next(stream) for _ in range(3)]
    stream.cancel()
    assert [e.seq for e in first] == [1, 2, 3]
    assert first[0].kind == pb.EVENT_KIND_DAEMON_STARTED and first[0].replayed
    resumed = stub.StreamEvents(pb.StreamEventsRequest(after_seq=2), timeout=10)
    assert next(resumed).seq == 3
    resumed.cancel()


def test_acknowledge_from_one_client_reaches_another(node) -> None:
    daemon, stub = node
    wait_for(lambda: "gpu_lost" in firing(stub))
    alert = firing(stub)["gpu_lost"]
    with grpc.insecure_channel(str(daemon.address)) as other_channel:
        other = pb_grpc.NodeServiceStub(other_channel)
        head = other.ListAlerts(pb.ListAlertsRequest(), timeout=5).last_seq
        watch = other.StreamEvents(pb.StreamEventsRequest(after_seq=head), timeout=10)
        acked = stub.AcknowledgeAlert(
            pb.AcknowledgeAlertRequest(alert_id=alert.id, comment="on it"), timeout=5
        )
        seen = next(e for e in watch if e.kind == pb.EVENT_KIND_ALERT_ACKNOWLEDGED)
        watch.cancel()
    # Without authentication every caller is the one local admin (gpufleet.policy.LOCAL_USER).
    assert acked.acknowledged_by == LOCAL_USER and acked.HasField("acknowledged_unix_ms")
    assert seen.alert.id == alert.id and seen.actor == LOCAL_USER and not seen.replayed
    assert firing(stub)["gpu_lost"].acknowledge_comment == "on it"


def test_silence_and_lift(node) -> None:
    _, stub = node
    wait_for(lambda: "gpu_lost" in firing(stub))
    alert_id = firing(stub)["gpu_lost"].id
    silenced = stub.SilenceAlert(
        pb.SilenceAlertRequest(alert_id=alert_id, duration_s=600, reason="card swap"),
        timeout=5,
    )
    assert silenced.silence_reason == "card swap" and silenced.HasField("silenced_until_unix_ms")
    lifted = stub.SilenceAlert(pb.SilenceAlertRequest(alert_id=alert_id, duration_s=0), timeout=5)
    assert not lifted.HasField("silenced_until_unix_ms")


@pytest.mark.parametrize(
    ("request_", "code", "words"),
    [
        (pb.AcknowledgeAlertRequest(alert_id=""), grpc.StatusCode.INVALID_ARGUMENT, "alert_id"),
        (pb.AcknowledgeAlertRequest(alert_id="a-999"), grpc.StatusCode.NOT_FOUND, "no alert a-999"),
        (pb.AcknowledgeAlertRequest(alert_id="a-1", comment="x" * 5000),
         grpc.StatusCode.INVALID_ARGUMENT, "comment is longer"),
        (pb.SilenceAlertRequest(alert_id="a-999", duration_s=60, reason="r"),
         grpc.StatusCode.NOT_FOUND, "no alert"),
        (pb.SilenceAlertRequest(alert_id="a-1", duration_s=99_999_999, reason="r"),
         grpc.StatusCode.INVALID_ARGUMENT, "7 days"),
        (pb.SilenceAlertRequest(alert_id="a-1", duration_s=60),
         grpc.StatusCode.INVALID_ARGUMENT, "needs a reason"),
    ],
)  # fmt: skip
def test_bad_requests_get_clear_errors_and_the_daemon_keeps_serving(
    node, request_, code, words
) -> None:
    _, stub = node
    call = (
        stub.AcknowledgeAlert
        if isinstance(request_, pb.AcknowledgeAlertRequest)
        else stub.SilenceAlert
    )
    with pytest.raises(grpc.RpcError) as info:
        call(request_, timeout=5)
    assert info.value.code() == code and words in info.value.details()
    assert stub.ListAlerts(pb.ListAlertsRequest(), timeout=5).journal_id


def test_a_key_error_from_a_bug_is_not_answered_not_found(node, monkeypatch, caplog) -> None:
    """Only UnknownAlert means "no such alert"; a KeyError inside the engine is a bug."""
    daemon, stub = node
    wait_for(lambda: "gpu_lost" in firing(stub))
    alert_id = firing(stub)["gpu_lost"].id

    def bug(*_args: object) -> None:
        raise KeyError(alert_id)

    monkeypatch.setattr(daemon.alerts, "acknowledge", bug)  # type: ignore[attr-defined]
    with pytest.raises(grpc.RpcError) as info:
        stub.AcknowledgeAlert(pb.AcknowledgeAlertRequest(alert_id=alert_id), timeout=5)
    assert info.value.code() == grpc.StatusCode.UNKNOWN, info.value.details()
    assert any(r.exc_info and r.exc_info[0] is KeyError for r in caplog.records)
    monkeypatch.undo()
    acked = stub.AcknowledgeAlert(pb.AcknowledgeAlertRequest(alert_id=alert_id), timeout=5)
    assert acked.acknowledged_by == LOCAL_USER
