"""Authentication, roles, TLS and the audit log over real gRPC."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from gpufleet.policy import METHOD_ROLES, Role
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.auth.audit import verify
from node_daemon.auth.identity import User
from node_daemon.auth.jwks import parse_jwks
from node_daemon.auth.settings import AuthSettings, TlsSettings
from node_daemon.auth.tokens import new_token, token_hash
from node_daemon.server import NodeDaemon
from tests.certs import Authority, write
from tests.conftest import DaemonFactory, wait_for
from tests.node_daemon.jwt_mint import Issuer, claims

# Workloads run as their owners' local accounts: the tests create them.
pytestmark = pytest.mark.usefixtures("workload_accounts")

TOKENS = {name: new_token() for name in ("vera", "otto", "ada", "old")}
USERS = (
    User("vera", Role.VIEWER, (), token_hash(TOKENS["vera"])),
    User("otto", Role.OPERATOR, ("ml",), token_hash(TOKENS["otto"])),
    User("ada", Role.ADMIN, (), token_hash(TOKENS["ada"])),
    User(
        "old", Role.ADMIN, (), token_hash(TOKENS["old"]), token_expires_unix_s=time.time() - 86400
    ),
)


# The same users as signed tokens (JWTs) from the nodes' JWKS: every rule below must
# hold for them as for static tokens (the tests take `kind`, "token" or "jwt").
ISSUER = Issuer()
JWTS = {
    u.name: ISSUER.mint(claims(u.name, u.role.name.lower(), u.teams, exp=int(time.time()) + 86400))
    for u in USERS
    if u.name != "old"
}
JWTS["old"] = ISSUER.mint(claims("old", "admin", exp=int(time.time()) - 86400), kid="ec-1")
JWTS["forged"] = ISSUER.mint(claims("ada", "admin"), kid="ed-1", key=ISSUER.stranger)
BEARERS = {"token": TOKENS, "jwt": JWTS}
KINDS = pytest.mark.parametrize("kind", ["token", "jwt"])


def metadata(user: str | None, kind: str = "token") -> tuple[tuple[str, str], ...]:
    return () if user is None else (("authorization", f"Bearer {BEARERS[kind][user]}"),)


def in_an_hour() -> int:
    return int((time.time() + 3600) * 1000)


# One request per method, shaped so that an allowed caller gets past every
# permission check (it may still fail later: NOT_FOUND and the like).
def requests(caller: str) -> dict[str, Any]:
    return {
        "GetInventory": pb.GetInventoryRequest(),
        "StreamSamples": pb.StreamSamplesRequest(),
        "ListAlerts": pb.ListAlertsRequest(),
        "StreamEvents": pb.StreamEventsRequest(),
        "ListEvents": pb.ListEventsRequest(since_unix_ms=1),
        "ListReservations": pb.ListReservationsRequest(),
        "ListWorkloads": pb.ListWorkloadsRequest(),
        "GetWorkloadOutput": pb.GetWorkloadOutputRequest(workload_id="w-999"),
        "WhoAmI": pb.WhoAmIRequest(),
        "QueryUsage": pb.QueryUsageRequest(),
        "AcknowledgeAlert": pb.AcknowledgeAlertRequest(alert_id="a-999"),
        "SilenceAlert": pb.SilenceAlertRequest(alert_id="a-999", duration_s=60, reason="r"),
        "CreateSilence": pb.CreateSilenceRequest(
            matchers=[pb.SilenceMatcher(label="alertname", pattern="gpu_temp")],
            duration_s=60,
            comment="maintenance",
        ),
        "ListSilences": pb.ListSilencesRequest(),
        "ExpireSilence": pb.ExpireSilenceRequest(silence_id="s-999"),
        "SubmitWorkload": pb.SubmitWorkloadRequest(argv=["true"], gpu_count=1, owner=caller),
        "AssignWorkload": pb.AssignWorkloadRequest(workload_id="w-999", gpu_indices=[0]),
        "CancelWorkload": pb.CancelWorkloadRequest(workload_id="w-999"),
        "Reserve": pb.ReserveRequest(gpu_indices=[0], holder=caller, until_unix_ms=in_an_hour()),
        "ReleaseReservation": pb.ReleaseReservationRequest(reservation_id="r-999"),
        "KillProcess": pb.KillProcessRequest(gpu_index=0, pid=999_999, start_time_unix_ms=1),
        "QueryAudit": pb.QueryAuditRequest(),
        "RecordExternalAction": pb.RecordExternalActionRequest(
            system="slurm", action="drain", target="node=gpu01", params="{}", result="OK"
        ),
        "GetHealth": pb.GetHealthRequest(),
        "QueryHistory": pb.QueryHistoryRequest(start_unix_ms=1, metrics=["temp_gpu_c"]),
        "GetStateAt": pb.GetStateAtRequest(at_unix_ms=int(time.time() * 1000)),
        "DrainGpu": pb.DrainGpuRequest(gpu_index=0, drain=True, reason="test"),
        "ClearGpuHealth": pb.ClearGpuHealthRequest(gpu_index=0, reason="test"),
    }


def call(
    stub: pb_grpc.NodeServiceStub, method: str, request: Any, user: str | None, kind: str = "token"
) -> grpc.StatusCode:
    """The status the call ends with (streams: after their first message)."""
    try:
        result = getattr(stub, method)(request, timeout=5, metadata=metadata(user, kind))
        if method.startswith("Stream"):
            next(result)
            result.cancel()
    except grpc.RpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


@pytest.fixture
def secured(start_daemon: DaemonFactory) -> Iterator[tuple[NodeDaemon, pb_grpc.NodeServiceStub]]:
    jwks = parse_jwks(ISSUER.jwks(), "test JWKS")
    daemon = start_daemon(gpus=2, auth=AuthSettings(USERS, jwks=jwks))
    wait_for(lambda: daemon.sampler.latest is not None)
    with grpc.insecure_channel(str(daemon.address)) as channel:
        yield daemon, pb_grpc.NodeServiceStub(channel)


def test_every_method_is_in_the_role_table() -> None:
    service = pb.DESCRIPTOR.services_by_name["NodeService"]
    assert {m.name for m in service.methods} == set(METHOD_ROLES)


@KINDS
@pytest.mark.parametrize("user", ["vera", "otto", "ada"])
@pytest.mark.parametrize("method", sorted(METHOD_ROLES))
def test_role_matrix(secured, user: str, method: str, kind: str) -> None:
    _, stub = secured
    role = next(u.role for u in USERS if u.name == user)
    code = call(stub, method, requests(user)[method], user, kind)
    if role >= METHOD_ROLES[method]:
        assert code not in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED), (
            code
        )
    else:
        assert code == grpc.StatusCode.PERMISSION_DENIED


@KINDS
@pytest.mark.parametrize("method", sorted(METHOD_ROLES))
def test_no_token_wrong_token_expired_token(secured, method: str, kind: str) -> None:
    _, stub = secured
    request = requests("ada")[method]
    assert call(stub, method, request, None) == grpc.StatusCode.UNAUTHENTICATED
    TOKENS["forged"] = "gft_" + "x" * 43
    assert call(stub, method, request, "forged", kind) == grpc.StatusCode.UNAUTHENTICATED
    assert call(stub, method, request, "old", kind) == grpc.StatusCode.UNAUTHENTICATED


def test_denials_say_what_is_missing(secured) -> None:
    _, stub = secured
    with pytest.raises(grpc.RpcError) as info:
        stub.GetInventory(pb.GetInventoryRequest(), timeout=5)
    assert "authorization: Bearer <token>" in info.value.details()
    with pytest.raises(grpc.RpcError) as info:
        stub.KillProcess(pb.KillProcessRequest(), timeout=5, metadata=metadata("vera"))
    assert info.value.details() == "KillProcess needs the operator role; vera is viewer"
    with pytest.raises(grpc.RpcError) as info:
        stub.GetInventory(pb.GetInventoryRequest(), timeout=5, metadata=metadata("old"))
    assert "the token of old expired on" in info.value.details()


def test_health_stays_open(secured) -> None:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    daemon, _ = secured
    with grpc.insecure_channel(str(daemon.address)) as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=5
        )
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


@KINDS
def test_operators_act_only_for_themselves_and_their_teams(secured, kind: str) -> None:
    _, stub = secured
    otto = metadata("otto", kind)
    for_team = pb.ReserveRequest(gpu_indices=[0], holder="team:ml", until_unix_ms=in_an_hour())
    mine = stub.Reserve(for_team, timeout=5, metadata=otto)
    assert mine.created_by == "otto"  # the token's user, whatever the request claims
    with pytest.raises(grpc.RpcError) as info:
        stub.Reserve(pb.ReserveRequest(gpu_indices=[1], holder="vera", until_unix_ms=in_an_hour()),
                     timeout=5, metadata=otto)  # fmt: skip
    assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "otto may reserve only for otto or team:ml, not vera" in info.value.details()
    theirs = stub.SubmitWorkload(pb.SubmitWorkloadRequest(argv=["true"], gpu_count=1, owner="vera"),
                                 timeout=5, metadata=metadata("ada", kind))  # fmt: skip
    with pytest.raises(grpc.RpcError) as info:
        stub.CancelWorkload(
            pb.CancelWorkloadRequest(workload_id=theirs.id), timeout=5, metadata=otto
        )
    assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED
    who = stub.WhoAmI(pb.WhoAmIRequest(), timeout=5, metadata=otto)
    assert (who.user, who.role, list(who.teams), who.authenticated_by) == (
        "otto",
        pb.ROLE_OPERATOR,
        ["ml"],
        kind,
    )


@KINDS
def test_changes_and_denials_are_audited_in_a_verifiable_chain(secured, kind: str) -> None:
    daemon, stub = secured
    stub.SubmitWorkload(pb.SubmitWorkloadRequest(argv=["true"], gpu_count=1), timeout=5,
                        metadata=metadata("otto", kind))  # fmt: skip
    call(stub, "KillProcess", pb.KillProcessRequest(gpu_index=1, pid=4321), "vera", kind)
    records = stub.QueryAudit(
        pb.QueryAuditRequest(), timeout=5, metadata=metadata("ada", kind)
    ).records
    results = [(r.user, r.method.rsplit("/", 1)[1], r.result) for r in reversed(records)]
    assert ("otto", "SubmitWorkload", "attempt") in results and (
        "otto",
        "SubmitWorkload",
        "OK",
    ) in results
    denied = next(r for r in records if r.method.endswith("KillProcess"))
    assert denied.user == "vera" and denied.result.startswith("DENIED: PERMISSION_DENIED")
    assert "gpu_index=1" in denied.target and "pid=4321" in denied.target
    assert denied.peer.startswith("ipv4:127.0.0.1")
    assert verify(daemon.audit.path) == []


def tamper(path: Path, sql: str) -> None:
    with sqlite3.connect(path) as db:
        db.execute(sql)


@pytest.mark.parametrize(
    ("sql", "named"),
    [
        ("UPDATE audit SET user = 'mallory' WHERE seq = 2", "record 2 was edited"),
        ("DELETE FROM audit WHERE seq = 2", "record 2 deleted"),
        ("UPDATE audit SET seq = seq + 100 WHERE seq = 2", "record 2 deleted"),
    ],
)
def test_audit_verify_names_the_tampered_record(secured, sql: str, named: str) -> None:
    daemon, stub = secured
    for _ in range(2):
        stub.SubmitWorkload(pb.SubmitWorkloadRequest(argv=["true"], gpu_count=1), timeout=5,
                            metadata=metadata("ada"))  # fmt: skip
    path = daemon.audit.path
    tamper(path, sql)
    command = [sys.executable, "-m", "node_daemon", "audit", "verify", "--file", str(path)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and named in result.stdout, result.stdout


def test_destructive_calls_are_refused_when_the_audit_log_is_full(secured) -> None:
    daemon, stub = secured
    db = daemon.audit._db
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    db.execute(f"PRAGMA max_page_count = {pages}")
    huge = pb.SubmitWorkloadRequest(argv=["true", "x" * 4000], gpu_count=1, name="y" * 900)
    with pytest.raises(grpc.RpcError) as info:
        for _ in range(50):  # fill the last page, then the next write fails
            stub.SubmitWorkload(huge, timeout=5, metadata=metadata("ada"))
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "audit" in info.value.details() and "refused" in info.value.details()
    submitted = len(
        stub.ListWorkloads(pb.ListWorkloadsRequest(), timeout=5, metadata=metadata("ada")).workloads
    )
    with pytest.raises(grpc.RpcError) as again:
        stub.SubmitWorkload(huge, timeout=5, metadata=metadata("ada"))
    assert again.value.code() == grpc.StatusCode.UNAVAILABLE, again.value.details()
    # Reads keep working, and the refused call changed nothing.
    after = stub.ListWorkloads(
        pb.ListWorkloadsRequest(), timeout=5, metadata=metadata("ada")
    ).workloads
    assert len(after) == submitted


# -- TLS ------------------------------------------------------------------------------


@pytest.fixture
def pki(tmp_path: Path) -> dict[str, Any]:
    ca, other_ca = Authority(), Authority("someone else's CA")
    server_cert, server_key = write(tmp_path, "server", ca.issue("localhost", server=True))
    (tmp_path / "ca.crt").write_bytes(ca.pem)
    return {
        "ca": ca, "ca_path": tmp_path / "ca.crt", "server": (server_cert, server_key),
        "alice": ca.issue("ada"), "expired": ca.issue("ada", expired=True),
        "stranger": other_ca.issue("ada"), "other_ca": other_ca,
    }  # fmt: skip


@pytest.fixture
def tls_daemon(start_daemon: DaemonFactory, pki) -> NodeDaemon:
    """TLS; callers identify with tokens."""
    cert, key = pki["server"]
    return start_daemon(gpus=1, auth=AuthSettings(USERS, TlsSettings(cert, key)))


@pytest.fixture
def mtls_daemon(start_daemon: DaemonFactory, pki) -> NodeDaemon:
    """Mutual TLS: a client certificate from our CA is required, and names the user."""
    cert, key = pki["server"]
    tls = TlsSettings(cert, key, client_ca=pki["ca_path"], require_client_cert=True)
    return start_daemon(gpus=1, auth=AuthSettings(USERS, tls))


def tls_stub(daemon: NodeDaemon, pki, client=None, ca=None) -> Callable[..., Any]:  # type: ignore[no-untyped-def]
    creds = grpc.ssl_channel_credentials(
        root_certificates=(ca or pki["ca"]).pem,
        private_key=client.key if client else None,
        certificate_chain=client.cert if client else None,
    )
    channel = grpc.secure_channel(f"localhost:{daemon.port}", creds)
    return channel, pb_grpc.NodeServiceStub(channel)


def who(stub, user=None) -> Any:  # type: ignore[no-untyped-def]
    return stub.WhoAmI(pb.WhoAmIRequest(), timeout=5, metadata=metadata(user))


def test_tls_with_token(tls_daemon, pki) -> None:
    channel, stub = tls_stub(tls_daemon, pki)
    assert who(stub, "otto").authenticated_by == "token"
    with pytest.raises(grpc.RpcError) as info:
        who(stub)
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
    channel.close()


def test_mutual_tls_names_the_user(mtls_daemon, pki) -> None:
    channel, stub = tls_stub(mtls_daemon, pki, client=pki["alice"])
    reply = who(stub)
    assert (reply.user, reply.authenticated_by) == ("ada", "client-certificate")
    channel.close()
    channel, stub = tls_stub(mtls_daemon, pki)  # no client certificate at all
    with pytest.raises(grpc.RpcError) as info:
        who(stub, "ada")
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    channel.close()


def test_a_revoked_users_client_certificate_is_refused(start_daemon: DaemonFactory, pki) -> None:
    cert, key = pki["server"]
    tls = TlsSettings(cert, key, client_ca=pki["ca_path"], require_client_cert=True)
    daemon = start_daemon(gpus=1, auth=AuthSettings(USERS, tls, revoked_users=frozenset({"ada"})))
    channel, stub = tls_stub(daemon, pki, client=pki["alice"])  # CN ada
    with pytest.raises(grpc.RpcError) as info:
        who(stub)
    channel.close()
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert info.value.details() == "the credentials of ada are revoked on this node"


@pytest.mark.parametrize("bad", ["expired", "stranger"])
def test_bad_client_certificates_are_rejected(mtls_daemon, pki, bad: str) -> None:
    channel, stub = tls_stub(mtls_daemon, pki, client=pki[bad])
    with pytest.raises(grpc.RpcError) as info:
        who(stub)
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE  # the handshake fails
    channel.close()


@pytest.mark.parametrize(
    "cn",
    ["ada\x00mallory", "otto\x00", "ada\n", "ad\x1ba", "ada\u202e", "ada\u200b"],
    ids=["nul-then-more", "trailing-nul", "newline", "escape", "bidi-override", "zero-width"],
)
def test_certificate_names_with_control_characters_are_refused(mtls_daemon, pki, cn: str) -> None:
    # gRPC hands over the CN as a C string: "ada\0mallory" arrived as the admin "ada".
    channel, stub = tls_stub(mtls_daemon, pki, client=pki["ca"].issue(cn))
    with pytest.raises(grpc.RpcError) as info:
        who(stub)
    channel.close()
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "has a control character" in info.value.details()
    assert repr(cn) in info.value.details()  # the whole name, escaped, as it was sent
    denied = mtls_daemon.audit.query(limit=1)[0]
    assert denied.user == "(unauthenticated)" and "control character" in denied.result


def test_wrong_ca_on_the_client_and_plaintext_to_the_tls_port(tls_daemon, pki) -> None:
    channel, stub = tls_stub(tls_daemon, pki, ca=pki["other_ca"])
    with pytest.raises(grpc.RpcError) as info:
        who(stub, "ada")
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    channel.close()
    with (
        grpc.insecure_channel(f"127.0.0.1:{tls_daemon.port}") as plain,
        pytest.raises(grpc.RpcError) as info,
    ):
        who(pb_grpc.NodeServiceStub(plain), "ada")
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE
