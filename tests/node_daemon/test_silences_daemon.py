"""Matcher silences over real gRPC: shared by clients, in the event stream, audited, kept
across a restart, refused on a full disk, and mirrored into a real Alertmanager."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
import pytest

from gpufleet.policy import LOCAL_USER, Role
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.auth.audit import verify
from node_daemon.auth.settings import AuthSettings
from node_daemon.backends.simulated import SimulatedBackend
from node_daemon.backends.simulated.scenario import Scenario, ScenarioEvent
from node_daemon.server import NodeDaemon
from tests.conftest import DaemonFactory, wait_for
from tests.daemon_process import DaemonProcess
from tests.node_daemon.alertmanager_harness import Alertmanager
from tests.node_daemon.journal import events_after
from tests.node_daemon.token_users import TokenUsers
from tests.small_disk import small_disk

HOST = "gpu-node-07"
LOST = Scenario((ScenarioEvent(0.2, 1, "lost"),))
Code = grpc.StatusCode
Node = tuple[NodeDaemon, pb_grpc.NodeServiceStub]


def lost_gpu_backend() -> SimulatedBackend:
    return SimulatedBackend(gpu_count=2, scenario=LOST, step_s=0.1)


@pytest.fixture
def node(start_daemon: DaemonFactory) -> Iterator[Node]:
    daemon = start_daemon(backend=lost_gpu_backend(), hostname=HOST)
    with grpc.insecure_channel(str(daemon.address)) as channel:
        yield daemon, pb_grpc.NodeServiceStub(channel)


def lost_alert(stub: pb_grpc.NodeServiceStub) -> pb.Alert | None:
    alerts = stub.ListAlerts(pb.ListAlertsRequest(), timeout=5).alerts
    return next((a for a in alerts if a.rule == "gpu_lost"), None)


def wait_lost(stub: pb_grpc.NodeServiceStub) -> pb.Alert:
    wait_for(lambda: lost_alert(stub) is not None, 10, "GPU 1 lost")
    alert = lost_alert(stub)
    assert alert is not None
    return alert


def matchers(*pairs: tuple[str, str]) -> list[pb.SilenceMatcher]:
    return [pb.SilenceMatcher(label=label, pattern=pattern) for label, pattern in pairs]


def create(stub: pb_grpc.NodeServiceStub, *pairs: tuple[str, str], **fields: object) -> pb.Silence:
    fields.setdefault("duration_s", 3600)
    fields.setdefault("comment", "swapping GPU 1")
    request = pb.CreateSilenceRequest(matchers=matchers(*pairs), **fields)  # type: ignore[arg-type]
    return stub.CreateSilence(request, timeout=5)


def listed(stub: pb_grpc.NodeServiceStub, include_expired: bool = True, limit: int = 0,
           metadata: tuple[tuple[str, str], ...] = ()) -> list[str]:  # fmt: skip
    request = pb.ListSilencesRequest(include_expired=include_expired, limit=limit)
    return [s.id for s in stub.ListSilences(request, timeout=5, metadata=metadata).silences]


def next_of(stream: Iterator[pb.Event], kind: pb.EventKind.ValueType) -> pb.Event:
    return next(e for e in stream if e.kind == kind)


def test_two_clients_share_silences_and_the_events_carry_them(node: Node) -> None:
    daemon, stub = node
    wait_lost(stub)
    with grpc.insecure_channel(str(daemon.address)) as other_channel:
        other = pb_grpc.NodeServiceStub(other_channel)
        head = other.ListAlerts(pb.ListAlertsRequest(), timeout=5).last_seq
        watch = other.StreamEvents(pb.StreamEventsRequest(after_seq=head), timeout=20)
        made = create(stub, ("node", "gpu-node-0*"), ("gpu", "1"))
        created = next_of(watch, pb.EVENT_KIND_SILENCE_CREATED)
        silenced = next_of(watch, pb.EVENT_KIND_ALERT_SILENCED)
        assert listed(other) == [made.id]
        ended = other.ExpireSilence(pb.ExpireSilenceRequest(silence_id=made.id), timeout=5)
        expired = next_of(watch, pb.EVENT_KIND_SILENCE_EXPIRED)
        unsilenced = next_of(watch, pb.EVENT_KIND_ALERT_UNSILENCED)
        watch.cancel()
    assert made.id == "s-1" and made.created_by == LOCAL_USER and made.comment == "swapping GPU 1"
    assert made.ends_unix_ms - made.starts_unix_ms == 3_600_000
    assert created.silence == made and created.actor == LOCAL_USER
    assert silenced.alert.rule == "gpu_lost" and silenced.alert.silence_id == "s-1"
    assert silenced.alert.silenced_until_unix_ms == made.ends_unix_ms
    assert ended.expired_by == LOCAL_USER and expired.silence == ended
    assert expired.actor == LOCAL_USER
    assert unsilenced.alert.silence_id == "" and not unsilenced.alert.HasField(
        "silenced_until_unix_ms"
    )
    after = lost_alert(stub)
    assert after is not None and after.silence_id == ""
    with pytest.raises(grpc.RpcError) as info:
        stub.ExpireSilence(pb.ExpireSilenceRequest(silence_id="s-1"), timeout=5)
    assert info.value.code() == Code.FAILED_PRECONDITION
    assert "silence s-1 already expired at " in info.value.details()
    assert f"(ended by {LOCAL_USER})" in info.value.details()


def test_listing_live_by_end_then_expired_newest_first(node: Node) -> None:
    _, stub = node
    late = create(stub, ("gpu", "0"), duration_s=7200)
    soon = create(stub, ("gpu", "1"), duration_s=600)
    window = create(stub, ("alertname", "*"), starts_unix_ms=int((time.time() + 3600) * 1000),
                    duration_s=60)  # fmt: skip
    gone = [create(stub, ("gpu", "0")).id for _ in range(3)]
    for silence_id in gone:
        stub.ExpireSilence(pb.ExpireSilenceRequest(silence_id=silence_id), timeout=5)
    live = [soon.id, window.id, late.id]
    assert listed(stub, include_expired=False) == live
    assert listed(stub) == live + gone[::-1]
    assert listed(stub, limit=1) == live + gone[-1:]


@pytest.mark.parametrize(
    ("request_", "code", "words"),
    [
        (pb.CreateSilenceRequest(duration_s=60, comment="c"), Code.INVALID_ARGUMENT,
         "at least one matcher"),
        (pb.CreateSilenceRequest(matchers=matchers(("gpu", "1")), duration_s=60),
         Code.INVALID_ARGUMENT, "needs a comment"),
        (pb.CreateSilenceRequest(matchers=matchers(("gpu index", "1")), duration_s=60,
                                 comment="c"), Code.INVALID_ARGUMENT, "is not a label name"),
        (pb.CreateSilenceRequest(matchers=matchers(("gpu", "1")), duration_s=60,
                                 ends_unix_ms=2**40, comment="c"), Code.INVALID_ARGUMENT,
         "not both"),
        (pb.CreateSilenceRequest(matchers=matchers(("gpu", "1")), duration_s=8 * 86_400,
                                 comment="c"), Code.INVALID_ARGUMENT, "at most 7 days"),
        (pb.CreateSilenceRequest(matchers=matchers(("gpu", "1")), starts_unix_ms=1,
                                 duration_s=60, comment="c"), Code.INVALID_ARGUMENT,
         "in the past"),
        (pb.ExpireSilenceRequest(), Code.INVALID_ARGUMENT, "silence_id is required"),
        (pb.ExpireSilenceRequest(silence_id="s-999"), Code.NOT_FOUND, "no silence s-999"),
        (pb.ExpireSilenceRequest(silence_id="s" * 100), Code.INVALID_ARGUMENT,
         "silence_id is longer than 64"),
    ],
)  # fmt: skip
def test_bad_requests_get_clear_errors(
    node: Node, request_: object, code: Code, words: str
) -> None:
    daemon, stub = node
    head = daemon.journal.last_seq
    call = (
        stub.CreateSilence
        if isinstance(request_, pb.CreateSilenceRequest)
        else (stub.ExpireSilence)
    )
    with pytest.raises(grpc.RpcError) as info:
        call(request_, timeout=5)
    assert info.value.code() == code and words in info.value.details(), info.value.details()
    assert [e for e in daemon.journal.events_after(head) if e.actor] == []
    assert listed(stub) == []


USERS = TokenUsers({"otto": Role.OPERATOR, "vera": Role.VIEWER})


def test_the_author_is_the_token_and_create_and_expire_are_audited(
    start_daemon: DaemonFactory,
) -> None:
    daemon = start_daemon(gpus=2, auth=AuthSettings(USERS.users))
    with grpc.insecure_channel(str(daemon.address)) as channel:
        stub = pb_grpc.NodeServiceStub(channel)
        request = pb.CreateSilenceRequest(matchers=matchers(("gpu", "0")), duration_s=60,
                                          comment="firmware update", actor="mallory")  # fmt: skip
        made = stub.CreateSilence(request, timeout=5, metadata=USERS.bearer("otto"))
        with pytest.raises(grpc.RpcError) as info:
            stub.CreateSilence(request, timeout=5, metadata=USERS.bearer("vera"))
        assert info.value.code() == Code.PERMISSION_DENIED
        assert listed(stub, metadata=USERS.bearer("vera")) == [made.id]  # a viewer may look
        ended = stub.ExpireSilence(pb.ExpireSilenceRequest(silence_id=made.id), timeout=5,
                                   metadata=USERS.bearer("otto"))  # fmt: skip
    assert made.created_by == "otto" and ended.expired_by == "otto"  # not what the caller said
    records = sorted(daemon.audit.query(limit=20), key=lambda r: r.seq)
    results = [(r.user, r.method.rsplit("/", 1)[1], r.result) for r in records]
    assert results == [
        ("otto", "CreateSilence", "attempt"), ("otto", "CreateSilence", "OK"),
        ("vera", "CreateSilence", f"DENIED: PERMISSION_DENIED: {info.value.details()}"),
        ("otto", "ExpireSilence", "attempt"), ("otto", "ExpireSilence", "OK"),
    ]  # fmt: skip
    create_params = next(r.params for r in records if r.method.endswith("CreateSilence"))
    assert '"pattern": "0"' in create_params and "firmware update" in create_params
    expire = next(r for r in records if r.method.endswith("ExpireSilence"))
    assert made.id in expire.target  # the audit names the silence it ended
    assert verify(daemon.audit.path) == []


SCENARIO = """
[[event]]
at = 0.2
gpu = 1
kind = "lost"
"""


def test_a_killed_daemon_restarts_with_its_silences_and_their_effect(tmp_path: Path) -> None:
    (tmp_path / "scenario.toml").write_text(SCENARIO, encoding="utf-8")
    daemon = DaemonProcess(tmp_path, "--backend", "simulated", "--gpus", "2", "--interval",
                           "0.1", "--scenario", str(tmp_path / "scenario.toml"))  # fmt: skip
    daemon.start()
    try:
        with grpc.insecure_channel(daemon.address) as channel:
            stub = pb_grpc.NodeServiceStub(channel)
            wait_lost(stub)
            kept = create(stub, ("alertname", "gpu_lost"))
            ended = create(stub, ("gpu", "0"))
            stub.ExpireSilence(pb.ExpireSilenceRequest(silence_id=ended.id), timeout=5)
            before = list(stub.ListSilences(pb.ListSilencesRequest(include_expired=True),
                                            timeout=5).silences)  # fmt: skip
        daemon.kill()
        daemon.start()
        with grpc.insecure_channel(daemon.address) as channel:
            stub = pb_grpc.NodeServiceStub(channel)
            after = list(stub.ListSilences(pb.ListSilencesRequest(include_expired=True),
                                           timeout=5).silences)  # fmt: skip
            alert = wait_lost(stub)
            head = stub.ListAlerts(pb.ListAlertsRequest(), timeout=5).last_seq
            since = events_after_ticks(stub, head, 10)
            again = lost_alert(stub)
            newer = create(stub, ("gpu", "1"))
    finally:
        daemon.stop()
    assert after == before
    flips = {pb.EVENT_KIND_ALERT_SILENCED, pb.EVENT_KIND_ALERT_UNSILENCED}
    assert [e.summary for e in since if e.kind in flips] == []  # no flicker at start-up
    assert alert.silence_id == kept.id and again is not None and again.silence_id == kept.id
    assert newer.id == "s-3"


def events_after_ticks(stub: pb_grpc.NodeServiceStub, head: int, ticks: int) -> list[pb.Event]:
    """The events after `head` once the daemon has swept `ticks` more times."""
    samples = stub.StreamSamples(pb.StreamSamplesRequest(), timeout=10)
    for _ in range(ticks):
        next(samples)
    samples.cancel()
    return events_after(stub, head)


def test_a_full_disk_refuses_a_create_clearly(start_daemon: DaemonFactory) -> None:
    with small_disk() as disk:
        daemon = start_daemon(backend=lost_gpu_backend(), hostname=HOST, state_dir=disk.path)
        with grpc.insecure_channel(str(daemon.address)) as channel:
            stub = pb_grpc.NodeServiceStub(channel)
            wait_lost(stub)
            disk.fill()
            with pytest.raises(grpc.RpcError) as info:
                create(stub, ("gpu", "1"))
            assert info.value.code() == Code.UNAVAILABLE
            assert "state disk full" in info.value.details(), info.value.details()
            assert listed(stub) == []
            alert = lost_alert(stub)
            assert alert is not None and alert.silence_id == ""
            disk.free()
            wait_for(lambda: try_create(stub), 15, "a create to work once there is room")
            assert listed(stub) == ["s-1"]
        daemon.stop(grace_s=0.5)


def try_create(stub: pb_grpc.NodeServiceStub) -> bool:
    try:
        create(stub, ("gpu", "1"))
    except grpc.RpcError as exc:
        assert exc.code() == Code.UNAVAILABLE, exc
        return False
    return True


# -- Alertmanager -------------------------------------------------------------------------


def am_state(am: Alertmanager, labels: dict[str, str]) -> str | None:
    alert = am.alert(labels)
    return None if alert is None else str(alert["status"]["state"])


@contextmanager
def lost_alert_in_alertmanager(
    alertmanager: Alertmanager, start_daemon: DaemonFactory
) -> Iterator[tuple[pb_grpc.NodeServiceStub, pb.Alert, dict[str, str]]]:
    """A daemon whose GPU 1 is lost, once its alert is active in `alertmanager`: its stub,
    the alert, and the labels Alertmanager knows the alert by."""
    daemon = start_daemon(backend=lost_gpu_backend(), hostname=HOST,
                          alertmanager_urls=(alertmanager.url,))  # fmt: skip
    with grpc.insecure_channel(str(daemon.address)) as channel:
        stub = pb_grpc.NodeServiceStub(channel)
        alert = wait_lost(stub)
        labels = {"alertname": "gpu_lost", "severity": "critical", "node": HOST, "gpu": "1",
                  "UUID": alert.gpu_uuid}  # fmt: skip
        wait_for(lambda: am_state(alertmanager, labels) == "active", 15, "active in Alertmanager")
        yield stub, alert, labels


def test_a_silenced_alert_is_suppressed_in_alertmanager(
    alertmanager: Alertmanager, start_daemon: DaemonFactory
) -> None:
    with lost_alert_in_alertmanager(alertmanager, start_daemon) as (stub, _, labels):
        made = create(stub, ("node", "gpu-node-0?"), ("alertname", "gpu_*"), ("gpu", "1"))
        wait_for(lambda: am_state(alertmanager, labels) == "suppressed", 15, "suppressed there")
        mirrored = [s for s in alertmanager.silences() if s["status"]["state"] == "active"]
        assert len(mirrored) == 1, mirrored
        in_alertmanager = alertmanager.alert(labels)
        assert in_alertmanager is not None
        assert in_alertmanager["status"]["silencedBy"] == [mirrored[0]["id"]]
        assert {(m["name"], m["value"], m["isRegex"]) for m in mirrored[0]["matchers"]} >= {
            ("node", "^(?s:gpu-node-0.)$", True), ("alertname", "^(?s:gpu_.*)$", True),
            ("gpu", "1", False), ("node", HOST, False),
        }  # fmt: skip
        stub.ExpireSilence(pb.ExpireSilenceRequest(silence_id=made.id), timeout=5)
        wait_for(lambda: am_state(alertmanager, labels) == "active", 15, "active again")


def test_a_per_alert_silence_is_suppressed_in_alertmanager_until_lifted(
    alertmanager: Alertmanager, start_daemon: DaemonFactory
) -> None:
    with lost_alert_in_alertmanager(alertmanager, start_daemon) as (stub, alert, labels):
        silence = pb.SilenceAlertRequest(alert_id=alert.id, duration_s=600, reason="card swap")
        stub.SilenceAlert(silence, timeout=5)
        wait_for(lambda: am_state(alertmanager, labels) == "suppressed", 15, "suppressed there")
        mirrored = [s for s in alertmanager.silences() if s["status"]["state"] == "active"]
        assert [{m["name"]: m["value"] for m in s["matchers"]} for s in mirrored] == [labels]
        assert not any(m["isRegex"] for m in mirrored[0]["matchers"])
        stub.SilenceAlert(pb.SilenceAlertRequest(alert_id=alert.id, duration_s=0), timeout=5)
        wait_for(lambda: am_state(alertmanager, labels) == "active", 15, "active again")
