"""Signed tokens (JWT) against a real daemon over gRPC: who they name, and what is refused.

The tokens are made in the test (tests/node_daemon/jwt_mint.py, `cryptography` only);
the daemon reads its JWKS from a daemon.toml, as on a node.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import grpc
import pytest

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.auth.tokens import new_token, token_hash
from node_daemon.config import load_config_file
from node_daemon.server import NodeDaemon
from tests.conftest import DaemonFactory
from tests.node_daemon.jwt_mint import Issuer, b64, claims, part

ISSUER_URL = "https://idp.example.org/realms/gpufleet"
STATIC = new_token()


def write_config(tmp_path: Path, issuer: Issuer, extra: str = "") -> Path:
    jwks = issuer.write_jwks(tmp_path / "jwks.json")
    config = tmp_path / "daemon.toml"
    config.write_text(
        f'[auth]\njwks_file = "{jwks}"\nissuer = "{ISSUER_URL}"\naudience = "gpufleet"\n'
        f"{extra}\n"
        f'[[auth.users]]\nname = "sam"\nrole = "admin"\ntoken_sha256 = "{token_hash(STATIC)}"\n'
        "token_expires = 2099-12-31\n",
        encoding="utf-8",
    )
    return config


def start(start_daemon: DaemonFactory, config_file: Path, **overrides: Any) -> NodeDaemon:
    config = load_config_file(config_file)
    return start_daemon(gpus=1, auth=config.auth, **overrides)


@pytest.fixture
def issuer() -> Issuer:
    return Issuer()


@pytest.fixture
def daemon(start_daemon: DaemonFactory, tmp_path: Path, issuer: Issuer) -> NodeDaemon:
    return start(start_daemon, write_config(tmp_path, issuer))


def good(user: str = "alice", role: str = "operator", **more: Any) -> dict[str, Any]:
    body = claims(user, role, ("ml", "vision"), iss=ISSUER_URL, aud="gpufleet", jti="j-1")
    return {**body, **more}


def who(daemon: NodeDaemon, token: str) -> pb.Caller:
    with grpc.insecure_channel(str(daemon.address)) as channel:
        stub = pb_grpc.NodeServiceStub(channel)
        return stub.WhoAmI(pb.WhoAmIRequest(), timeout=5,
                           metadata=(("authorization", f"Bearer {token}"),))  # fmt: skip


def refusal(daemon: NodeDaemon, token: str) -> str:
    with pytest.raises(grpc.RpcError) as info:
        who(daemon, token)
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED, info.value.details()
    details = info.value.details()
    signature = token.split(".")[-1]
    assert token not in details and (not signature or signature not in details)  # never echoed
    return details


@pytest.mark.parametrize("kid", ["ed-1", "ec-1"], ids=["EdDSA", "ES256"])
def test_a_valid_jwt_names_user_role_teams_and_expiry(daemon, issuer: Issuer, kid: str) -> None:
    body = good()
    reply = who(daemon, issuer.mint(body, kid=kid))
    assert (reply.user, reply.role, list(reply.teams)) == (
        "alice",
        pb.ROLE_OPERATOR,
        ["ml", "vision"],
    )
    assert reply.authenticated_by == "jwt"
    assert reply.credential_expires_unix_ms == body["exp"] * 1000
    assert (reply.token_issuer, reply.token_id) == (ISSUER_URL, "j-1")
    assert reply.allow_kill_job_processes is False


def test_whoami_reports_static_expiry_and_the_kill_policy(
    start_daemon: DaemonFactory, tmp_path: Path, issuer: Issuer
) -> None:
    daemon = start(start_daemon, write_config(tmp_path, issuer), allow_kill_job_processes=True)
    reply = who(daemon, STATIC)
    assert (reply.user, reply.authenticated_by, reply.token_issuer) == ("sam", "token", "")
    end_of_2099 = time.mktime(time.strptime("2100-01-01", "%Y-%m-%d")) - time.timezone
    assert abs(reply.credential_expires_unix_ms / 1000 - end_of_2099) < 1
    assert reply.allow_kill_job_processes is True


def tampered(issuer: Issuer) -> str:
    header, _, sig = issuer.mint(good(role="viewer")).split(".")
    return f"{header}.{part(good(role='admin'))}.{sig}"  # the role raised, the signature kept


def not_base64(_issuer: Issuer) -> str:
    return "eyJhbGciOiJFZERTQSJ9.***.abc"


def without(name: str) -> dict[str, Any]:
    return {k: v for k, v in good().items() if k != name}


CRIT = {"alg": "EdDSA", "kid": "ed-1", "crit": ["exp"]}
REFUSED = {
    "expired": (lambda i: i.mint(good(exp=int(time.time()) - 120)), "JWT expired at "),
    "not yet valid": (lambda i: i.mint(good(nbf=int(time.time()) + 600)), "not valid before"),
    "wrong issuer": (lambda i: i.mint(good(iss="https://evil.example")), "issuer"),
    "no issuer": (lambda i: i.mint(without("iss")), "issuer"),
    "wrong audience": (lambda i: i.mint(good(aud=["account", "grafana"])), "audience"),
    "unknown kid": (lambda i: i.mint(good(), kid="ed-9", key=i.keys["ed-1"]), "not in this"),
    "key not in the JWKS": (lambda i: i.mint(good(), key=i.stranger), "signature is not valid"),
    "alg none": (lambda i: i.unsigned(good()), "alg 'none' is not accepted"),
    "HS256, public key as secret": (lambda i: i.hs256_with_public_key(good()), "alg 'HS256'"),
    "alg of the other key": (lambda i: i.mint(good(), key=i.keys["ec-1"]), "does not match"),
    "tampered claim": (tampered, "signature is not valid"),
    "two parts": (lambda i: ".".join(i.mint(good()).split(".")[:2]), "malformed JWT"),
    "not base64": (not_base64, "malformed JWT"),
    "payload not JSON": (lambda i: f"{part({'alg': 'EdDSA'})}.{b64(b'{x')}.eA", "malformed JWT"),
    "no role": (lambda i: i.mint(without("gpufleet_role")), "no gpufleet_role"),
    "bad role": (lambda i: i.mint(good(role="root")), "role must be viewer, operator or admin"),
    "no exp": (lambda i: i.mint(without("exp")), "no exp"),
    "exp past year 9999": (lambda i: i.mint(good(exp=10**20)), "exp is out of range"),
    "no sub": (lambda i: i.mint(without("sub")), "claim sub"),
    "crit header": (lambda i: i.mint(good(), header=CRIT), "crit"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_bad_jwts_are_refused_with_a_clear_message(daemon, issuer: Issuer, case: str) -> None:
    make, said = REFUSED[case]
    details = refusal(daemon, make(issuer))
    assert said in details, details


def test_expiry_message_says_when(daemon, issuer: Issuer) -> None:
    details = refusal(daemon, issuer.mint(good(exp=1_700_000_000)))
    assert details == "JWT expired at 2023-11-14 22:13:20 UTC"


def test_the_leeway_admits_a_token_just_past_exp(daemon, issuer: Issuer) -> None:
    assert who(daemon, issuer.mint(good(exp=int(time.time()) - 5))).user == "alice"  # 30 s leeway


def test_audience_may_be_a_list_and_role_a_list(daemon, issuer: Issuer) -> None:
    token = issuer.mint(good(aud=["account", "gpufleet"], gpufleet_role=["viewer", "admin"]))
    assert who(daemon, token).role == pb.ROLE_ADMIN


def test_revoked_jti_and_users_are_refused(
    start_daemon: DaemonFactory, tmp_path: Path, issuer: Issuer
) -> None:
    extra = 'revoked_jti = ["j-bad"]\nrevoked_users = ["mallory", "sam"]'
    daemon = start(start_daemon, write_config(tmp_path, issuer, extra))
    assert "revoked" in refusal(daemon, issuer.mint(good(jti="j-bad")))
    assert "revoked" in refusal(daemon, issuer.mint(good(user="mallory", jti="j-2")))
    assert "revoked" in refusal(daemon, STATIC)  # a revoked user's static token too
    assert who(daemon, issuer.mint(good(jti="j-good"))).user == "alice"


def test_the_audit_log_records_the_jwt_user(daemon, issuer: Issuer) -> None:
    token = issuer.mint(good(user="otto", role="operator"))
    with grpc.insecure_channel(str(daemon.address)) as channel:
        stub = pb_grpc.NodeServiceStub(channel)
        with pytest.raises(grpc.RpcError):  # no such alert: refused after the audit
            stub.AcknowledgeAlert(pb.AcknowledgeAlertRequest(alert_id="a-1"), timeout=5,
                                  metadata=(("authorization", f"Bearer {token}"),))  # fmt: skip
    records = daemon.audit.query(limit=10)
    acks = {(r.user, r.result) for r in records if r.method.endswith("AcknowledgeAlert")}
    assert acks == {("otto", "attempt"), ("otto", "NOT_FOUND: no alert a-1 on this node")}
    assert all(token not in r.params and token not in r.result for r in records)


def test_a_jwt_without_kid_is_refused_when_the_jwks_has_several(daemon, issuer: Issuer) -> None:
    token = issuer.mint(good(), header={"alg": "EdDSA", "typ": "JWT"})
    assert "no kid" in refusal(daemon, token)


def test_a_single_key_jwks_takes_tokens_without_kid(
    start_daemon: DaemonFactory, tmp_path: Path
) -> None:
    issuer = Issuer()
    del issuer.keys["ec-1"]
    daemon = start(start_daemon, write_config(tmp_path, issuer))
    assert who(daemon, issuer.mint(good(), header={"alg": "EdDSA"})).user == "alice"


def test_a_jwt_for_a_node_without_jwks_is_refused(start_daemon: DaemonFactory) -> None:
    from gpufleet.policy import Role
    from node_daemon.auth.identity import User
    from node_daemon.auth.settings import AuthSettings

    daemon = start_daemon(
        gpus=1, auth=AuthSettings((User("sam", Role.ADMIN, (), token_hash(STATIC)),))
    )
    assert "takes no JWTs" in refusal(daemon, Issuer().mint(good()))


def test_rsa_keys_of_an_idp_export_are_skipped_and_named(
    start_daemon: DaemonFactory, tmp_path: Path, issuer: Issuer
) -> None:
    config = write_config(tmp_path, issuer)
    jwks = json.loads((tmp_path / "jwks.json").read_text())
    rsa = {"kid": "rsa-1", "kty": "RSA", "alg": "RS256", "use": "sig", "n": "AQAB", "e": "AQAB"}
    enc = {**jwks["keys"][1], "kid": "enc-1", "use": "enc"}
    jwks["keys"] += [rsa, enc]
    (tmp_path / "jwks.json").write_text(json.dumps(jwks))
    daemon = start(start_daemon, config)
    assert who(daemon, issuer.mint(good(), kid="ec-1")).user == "alice"
    header = {"alg": "RS256", "kid": "rsa-1"}
    assert "alg 'RS256' is not accepted" in refusal(daemon, issuer.mint(good(), header=header))
    details = refusal(daemon, issuer.mint(good(), kid="enc-1", key=issuer.keys["ec-1"]))
    assert "a key this node does not verify with" in details and "'sig'" in details


def test_a_token_is_refused_once_the_interceptor_drops_its_key(daemon, issuer: Issuer) -> None:
    """The cache of verified tokens belongs to one auth state: a reload empties it."""
    from dataclasses import replace

    from node_daemon.auth.jwks import parse_jwks

    token = issuer.mint(good(), kid="ec-1")
    assert who(daemon, token).user == "alice"  # verified and cached
    settings = daemon.auth_interceptor.settings
    only_ed = {"keys": [k for k in issuer.jwks()["keys"] if k["kid"] == "ed-1"]}
    daemon.auth_interceptor.reconfigure(replace(settings, jwks=parse_jwks(only_ed, "new")))
    assert "not in this node's JWKS" in refusal(daemon, token)


def test_a_token_over_8_kib_is_refused(daemon, issuer: Issuer) -> None:
    # gRPC's own 8 KiB metadata limit is soft: between it and the hard limit a call is
    # refused at random (RESOURCE_EXHAUSTED), else it reaches the verifier's own limit.
    from node_daemon.auth.jwt import InvalidToken, JwtPolicy, verify

    token = issuer.mint(good(pad="x" * 9000))
    with pytest.raises(grpc.RpcError) as info:
        who(daemon, token)
    if info.value.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
        assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "token too long" in info.value.details()
    policy = JwtPolicy(daemon.auth_interceptor.settings.jwks)  # type: ignore[arg-type]
    with pytest.raises(InvalidToken, match=r"token too long \(\d+ bytes; at most 8192\)"):
        verify(token, policy)


@pytest.mark.usefixtures("workload_accounts")
def test_a_jwt_users_groups_count_for_their_workloads_on_a_team_reservation(
    daemon, issuer: Issuer
) -> None:
    """alice's teams come only from her token: a GPU reserved for team:ml takes her work."""
    from tests.conftest import wait_for

    wait_for(lambda: daemon.sampler.latest is not None)
    alice = (("authorization", f"Bearer {issuer.mint(good())}"),)  # groups ml, vision
    sam = (("authorization", f"Bearer {STATIC}"),)
    until = int((time.time() + 3600) * 1000)
    with grpc.insecure_channel(str(daemon.address)) as channel:
        stub = pb_grpc.NodeServiceStub(channel)
        stub.Reserve(pb.ReserveRequest(gpu_indices=[0], holder="team:ml", until_unix_ms=until),
                     timeout=5, metadata=sam)  # fmt: skip
        submitted = stub.SubmitWorkload(
            pb.SubmitWorkloadRequest(argv=["sleep", "5"], gpu_count=1), timeout=5, metadata=alice
        )
        assert submitted.owner == "alice"
        started = stub.AssignWorkload(
            pb.AssignWorkloadRequest(workload_id=submitted.id, gpu_indices=[0]),
            timeout=5, metadata=alice,
        )  # fmt: skip
        assert list(started.gpu_indices) == [0]
        stub.CancelWorkload(pb.CancelWorkloadRequest(workload_id=submitted.id), timeout=5,
                            metadata=alice)  # fmt: skip
