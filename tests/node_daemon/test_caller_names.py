"""One caller, one name (#33 defect 8): WhoAmI, an acknowledgement, a silence, a drain,
a reservation, the events and the audit log all name a caller as the node identified it.

Without authentication that is gpufleet.policy.LOCAL_USER (it was "local" in WhoAmI
and the audit log, the console's login name in an acknowledgement, "anonymous" in a
drain); with a credential, its user (a static token's name, a JWT's subject). A name
the caller claims in a request's `actor` field is recorded nowhere.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import grpc
import pytest
from google.protobuf.message import Message

from gpufleet.policy import LOCAL_USER, Role
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.auth.identity import User
from node_daemon.auth.jwks import parse_jwks
from node_daemon.auth.settings import AuthSettings
from node_daemon.auth.tokens import new_token, token_hash
from node_daemon.backends.simulated import SimulatedBackend
from node_daemon.backends.simulated.scenario import Scenario, ScenarioEvent
from node_daemon.server import NodeDaemon
from tests.conftest import DaemonFactory, wait_for
from tests.node_daemon.jwt_mint import Issuer, claims

LOST = Scenario((ScenarioEvent(0.2, 1, "lost"),))  # GPU 1: an alert to acknowledge
SUBJECT = "ada"  # the credential's user, an admin: it may read the audit log
TOKEN = new_token()
ISSUER = Issuer()
Metadata = tuple[tuple[str, str], ...]
# What each change's event is; each must carry the actor.
ACTED = {
    pb.EVENT_KIND_ALERT_ACKNOWLEDGED, pb.EVENT_KIND_ALERT_SILENCED,
    pb.EVENT_KIND_SILENCE_CREATED, pb.EVENT_KIND_SILENCE_EXPIRED, pb.EVENT_KIND_GPU_DRAINED,
    pb.EVENT_KIND_GPU_UNDRAINED, pb.EVENT_KIND_RESERVATION_MADE,
    pb.EVENT_KIND_RESERVATION_RELEASED,
}  # fmt: skip
CHANGES = {
    "AcknowledgeAlert", "SilenceAlert", "CreateSilence", "ExpireSilence", "DrainGpu",
    "Reserve", "ReleaseReservation",
}  # fmt: skip


@dataclass
class Seen:
    """Every name a client is told for the caller (where -> name), and every answer."""

    names: dict[str, str] = field(default_factory=dict)
    answers: list[Message] = field(default_factory=list)

    def keep(self, answer: Message, **names: str) -> None:
        self.answers.append(answer)
        self.names.update(names)


def start(factory: DaemonFactory, kind: str) -> tuple[NodeDaemon, Metadata]:
    """A daemon on loopback as `kind` ("none", "token", "jwt") has it, and the metadata
    of a caller with that credential."""
    backend = SimulatedBackend(gpu_count=3, scenario=LOST, step_s=0.1)
    if kind == "none":
        return factory(backend=backend), ()
    users = (User(SUBJECT, Role.ADMIN, (), token_hash(TOKEN)),)
    if kind == "token":
        return factory(backend=backend, auth=AuthSettings(users)), bearer(TOKEN)
    jwks = parse_jwks(ISSUER.jwks(), "test JWKS")
    jwt = ISSUER.mint(claims(SUBJECT, "admin"))
    return factory(backend=backend, auth=AuthSettings((), jwks=jwks)), bearer(jwt)


def bearer(token: str) -> Metadata:
    return (("authorization", f"Bearer {token}"),)


def act(daemon: NodeDaemon, metadata: Metadata, claim: str = "") -> Seen:
    """Acknowledge, silence, drain and reserve as one caller, sending `claim` as the actor
    of every request that has one; what the node answered and lists afterwards."""
    seen = Seen()
    with grpc.insecure_channel(str(daemon.address)) as channel:
        stub = pb_grpc.NodeServiceStub(channel)
        me = stub.WhoAmI(pb.WhoAmIRequest(), timeout=5, metadata=metadata)
        seen.keep(me, who_am_i=me.user)
        acknowledge_and_silence(stub, metadata, claim, seen)
        drain_and_reserve(stub, metadata, claim, seen)
        events = read_events(stub, metadata)
        seen.answers += events
        assert {e.kind for e in events if e.actor} >= ACTED, "a change's event without its actor"
        seen.names.update((f"event {e.seq} actor", e.actor) for e in events if e.actor)
        audit = stub.QueryAudit(pb.QueryAuditRequest(limit=1000), timeout=5, metadata=metadata)
        seen.keep(audit, **{f"audit {r.seq} user": r.user for r in audit.records})
        audited = {r.method.rsplit("/", 1)[1] for r in audit.records}
        assert audited >= CHANGES, "a change not audited"
    return seen


def acknowledge_and_silence(
    stub: pb_grpc.NodeServiceStub, metadata: Metadata, claim: str, seen: Seen
) -> None:
    alert = wait_for_lost(stub, metadata)
    ack = stub.AcknowledgeAlert(
        pb.AcknowledgeAlertRequest(alert_id=alert.id, comment="on it", actor=claim),
        timeout=5, metadata=metadata,
    )  # fmt: skip
    seen.keep(ack, acknowledged_by=ack.acknowledged_by)
    quiet = stub.SilenceAlert(
        pb.SilenceAlertRequest(alert_id=alert.id, duration_s=600, reason="card swap",
                               actor=claim),
        timeout=5, metadata=metadata,
    )  # fmt: skip
    seen.keep(quiet, silenced_by=quiet.silenced_by)
    made = stub.CreateSilence(
        pb.CreateSilenceRequest(matchers=[pb.SilenceMatcher(label="gpu", pattern="1")],
                                duration_s=600, comment="swapping GPU 1", actor=claim),
        timeout=5, metadata=metadata,
    )  # fmt: skip
    seen.keep(made, silence_created_by=made.created_by)
    listed = stub.ListAlerts(pb.ListAlertsRequest(), timeout=5, metadata=metadata)
    (again,) = [a for a in listed.alerts if a.id == alert.id]
    seen.keep(listed, listed_acknowledged_by=again.acknowledged_by,
              listed_silenced_by=again.silenced_by)  # fmt: skip
    ended = stub.ExpireSilence(pb.ExpireSilenceRequest(silence_id=made.id, actor=claim),
                               timeout=5, metadata=metadata)  # fmt: skip
    seen.keep(ended, silence_expired_by=ended.expired_by)


def drain_and_reserve(
    stub: pb_grpc.NodeServiceStub, metadata: Metadata, claim: str, seen: Seen
) -> None:
    drain = pb.DrainGpuRequest(gpu_index=0, drain=True, reason="fan noise")
    drained = stub.DrainGpu(drain, timeout=5, metadata=metadata)
    seen.keep(drained, drained_by=drained.drained_by)
    health = stub.GetHealth(pb.GetHealthRequest(), timeout=5, metadata=metadata)
    (gpu0,) = [g for g in health.gpus if g.gpu_index == 0]
    seen.keep(health, health_drained_by=gpu0.drained_by)
    undrain = pb.DrainGpuRequest(gpu_index=0, drain=False)
    seen.keep(stub.DrainGpu(undrain, timeout=5, metadata=metadata))
    until = int((time.time() + 3600) * 1000)
    reserve = pb.ReserveRequest(gpu_indices=[2], holder="team:ml", until_unix_ms=until,
                                reason="paper deadline", actor=claim)  # fmt: skip
    held = stub.Reserve(reserve, timeout=5, metadata=metadata)
    seen.keep(held, reservation_created_by=held.created_by)
    release = pb.ReleaseReservationRequest(reservation_id=held.id, actor=claim)
    seen.keep(stub.ReleaseReservation(release, timeout=5, metadata=metadata))


def wait_for_lost(stub: pb_grpc.NodeServiceStub, metadata: Metadata) -> pb.Alert:
    def lost() -> pb.Alert | None:
        alerts = stub.ListAlerts(pb.ListAlertsRequest(), timeout=5, metadata=metadata).alerts
        return next((a for a in alerts if a.rule == "gpu_lost"), None)

    wait_for(lambda: lost() is not None, 10, "GPU 1 lost")
    alert = lost()
    assert alert is not None
    return alert


def read_events(stub: pb_grpc.NodeServiceStub, metadata: Metadata) -> list[pb.Event]:
    """The journal from its start up to the last event now, as a console replays it."""
    head = stub.ListAlerts(pb.ListAlertsRequest(), timeout=5, metadata=metadata).last_seq
    stream = stub.StreamEvents(pb.StreamEventsRequest(after_seq=0), timeout=10, metadata=metadata)
    events: list[pb.Event] = []
    try:
        for event in stream:
            events.append(event)
            if event.seq >= head:
                break
    finally:
        stream.cancel()
    return events


def the_one_name(seen: Seen) -> str:
    names = set(seen.names.values())
    assert len(names) == 1, f"one caller, several names: {seen.names}"
    return names.pop()


def test_an_unauthenticated_loopback_caller_has_one_name_everywhere(
    start_daemon: DaemonFactory,
) -> None:
    daemon, metadata = start(start_daemon, "none")
    seen = act(daemon, metadata)
    assert the_one_name(seen) == LOCAL_USER
    assert seen.names["who_am_i"] == LOCAL_USER and seen.names["drained_by"] == LOCAL_USER
    assert any(key.startswith("audit ") for key in seen.names)


@pytest.mark.parametrize("kind", ["token", "jwt"])
def test_a_caller_with_a_credential_is_its_user_everywhere(
    start_daemon: DaemonFactory, kind: str
) -> None:
    daemon, metadata = start(start_daemon, kind)
    seen = act(daemon, metadata)
    assert the_one_name(seen) == SUBJECT
    assert any(key.startswith("event ") for key in seen.names)


@pytest.mark.parametrize("kind", ["none", "token"])
def test_a_caller_cannot_choose_the_name_recorded(start_daemon: DaemonFactory, kind: str) -> None:
    """Every request's `actor` says "mallory": the node records and answers its own name
    for the caller, and the claim appears nowhere, not even in the audit log's params."""
    daemon, metadata = start(start_daemon, kind)
    seen = act(daemon, metadata, claim="mallory")
    assert the_one_name(seen) == (LOCAL_USER if kind == "none" else SUBJECT)
    told = [str(answer) for answer in seen.answers]
    assert not [text for text in told if "mallory" in text]
    # The audit log does keep each request's params: the claim's absence there means something.
    assert any('"reason": "paper deadline"' in r.params for r in daemon.audit.query(limit=100))
