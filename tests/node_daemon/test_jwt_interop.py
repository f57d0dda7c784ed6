"""`gpufleet token keygen` / `issue` end to end, checked from outside by PyJWT.

PyJWT is an independent implementation: it must accept what `token issue` signs
(with the public key from keygen's jwks.json), and the daemon must accept what
PyJWT signs. So the contract holds between strangers, not just with ourselves.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import grpc
import jwt as pyjwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.config import load_config_file
from node_daemon.server import NodeDaemon
from tests.conftest import DaemonFactory
from tests.node_daemon.jwt_mint import jwk_of


def gpufleet(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "node_daemon", "token", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


def keygen(out: Path, *args: str) -> None:
    result = gpufleet("keygen", "--out", str(out), *args)
    assert result.returncode == 0, result.stderr


def daemon_for(start_daemon: DaemonFactory, tmp_path: Path, jwks: Path) -> NodeDaemon:
    config = tmp_path / "daemon.toml"
    config.write_text(f'[auth]\njwks_file = "{jwks}"\nissuer = "ops"\naudience = "gpufleet"\n')
    return start_daemon(gpus=1, auth=load_config_file(config).auth)


def who(daemon: NodeDaemon, token: str) -> pb.Caller:
    with grpc.insecure_channel(str(daemon.address)) as channel:
        return pb_grpc.NodeServiceStub(channel).WhoAmI(
            pb.WhoAmIRequest(), timeout=5, metadata=(("authorization", f"Bearer {token}"),)
        )


def issue(key: Path, *more: str) -> str:
    result = gpufleet("issue", "--key", str(key), "--user", "alice", "--role", "operator",
                      "--groups", "ml,vision", "--expires", "30d", "--issuer", "ops",
                      "--audience", "gpufleet", *more)  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 1 and result.stdout == lines[0] + "\n"  # the token, nothing else
    return lines[0]


@pytest.mark.parametrize("alg", ["EdDSA", "ES256"])
def test_keygen_and_issue_are_accepted_by_a_daemon(
    start_daemon: DaemonFactory, tmp_path: Path, alg: str
) -> None:
    keys = tmp_path / "keys"
    keygen(keys, "--alg", alg)
    jwks = json.loads((keys / "jwks.json").read_text())
    (kid,) = [k["kid"] for k in jwks["keys"]]
    private = keys / f"{kid}.private.pem"
    assert stat.S_IMODE(os.stat(private).st_mode) == 0o600
    assert all("d" not in k for k in jwks["keys"])  # public keys only
    daemon = daemon_for(start_daemon, tmp_path, keys / "jwks.json")
    token = issue(private)
    reply = who(daemon, token)
    assert (reply.user, reply.role, list(reply.teams)) == (
        "alice",
        pb.ROLE_OPERATOR,
        ["ml", "vision"],
    )
    assert reply.authenticated_by == "jwt" and reply.token_issuer == "ops"
    assert len(reply.token_id) == 32  # --jti auto
    assert abs(reply.credential_expires_unix_ms / 1000 - (time.time() + 30 * 86400)) < 120


def test_pyjwt_verifies_what_token_issue_signs(tmp_path: Path) -> None:
    keygen(tmp_path, "--alg", "ES256", "--kid", "ops-2026")
    keygen(tmp_path, "--alg", "EdDSA", "--kid", "ops-2027")  # a second key: rotation
    jwks = pyjwt.PyJWKSet.from_dict(json.loads((tmp_path / "jwks.json").read_text()))
    for kid in ("ops-2026", "ops-2027"):
        token = issue(tmp_path / f"{kid}.private.pem")  # the kid found in jwks.json beside it
        header = pyjwt.get_unverified_header(token)
        assert header["kid"] == kid
        decoded = pyjwt.decode(token, jwks[kid].key, algorithms=[header["alg"]],
                               audience="gpufleet", issuer="ops")  # fmt: skip
        assert decoded["sub"] == "alice" and decoded["gpufleet_role"] == "operator"
        assert decoded["groups"] == ["ml", "vision"] and decoded["exp"] > time.time()


@pytest.mark.parametrize("alg", ["EdDSA", "ES256"])
def test_the_daemon_accepts_what_pyjwt_signs(
    start_daemon: DaemonFactory, tmp_path: Path, alg: str
) -> None:
    key = (
        ed25519.Ed25519PrivateKey.generate()
        if alg == "EdDSA"
        else ec.generate_private_key(ec.SECP256R1())
    )
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [jwk_of(key, "idp-1")]}))
    daemon = daemon_for(start_daemon, tmp_path, jwks)
    now = int(time.time())
    body = {"sub": "bob", "gpufleet_role": "admin", "groups": ["infra"], "iss": "ops",
            "aud": ["account", "gpufleet"], "exp": now + 600, "nbf": now, "jti": "x-1"}  # fmt: skip
    token = pyjwt.encode(body, key, algorithm=alg, headers={"kid": "idp-1"})
    reply = who(daemon, token)
    assert (reply.user, reply.role, list(reply.teams), reply.token_id) == (
        "bob", pb.ROLE_ADMIN, ["infra"], "x-1",
    )  # fmt: skip
    with pytest.raises(grpc.RpcError) as info:
        who(daemon, pyjwt.encode({**body, "aud": "other"}, key, algorithm=alg,
                                 headers={"kid": "idp-1"}))  # fmt: skip
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "audience" in info.value.details()


def test_keygen_never_overwrites_and_issue_refuses_a_bad_key(tmp_path: Path) -> None:
    keygen(tmp_path, "--kid", "k1")
    again = gpufleet("keygen", "--out", str(tmp_path), "--kid", "k1")
    assert again.returncode == 2 and "already in" in again.stderr
    (tmp_path / "junk.pem").write_text("not a key\n")
    bad = gpufleet("issue", "--key", str(tmp_path / "junk.pem"), "--user", "a", "--role",
                   "viewer", "--expires", "1h")  # fmt: skip
    assert bad.returncode == 2 and bad.stdout == "" and "cannot use" in bad.stderr
    duration = gpufleet("issue", "--key", str(tmp_path / "k1.private.pem"), "--user", "a",
                        "--role", "viewer", "--expires", "forever")  # fmt: skip
    assert duration.returncode == 2 and "--expires must be like 30d" in duration.stderr
