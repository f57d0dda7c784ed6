"""The rotation acceptance test of #13, on a real daemon process and a real SIGHUP: a new key
added to the JWKS and a user revoked take effect at once, while a stream opened before keeps
delivering; then the old key is retired, and the stream its token opened ends (#28). Tokens
are minted with `cryptography` alone."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519

from gpufleet.v1 import node_pb2 as pb
from tests.conftest import wait_for
from tests.node_daemon.jwt_mint import Issuer, Key, claims, jwk_of
from tests.node_daemon.reload_harness import ReloadableDaemon, bearer, more_than, open_streams


def write_jwks(path: Path, issuer: Issuer, *kids: str) -> None:
    keys = [jwk_of(issuer.keys[kid], kid) for kid in kids]
    path.write_text(json.dumps({"keys": keys}), encoding="utf-8")


def config(jwks: Path, revoked_users: tuple[str, ...] = ()) -> str:
    revoked = ", ".join(f'"{u}"' for u in revoked_users)
    return f'[auth]\njwks_file = "{jwks}"\nrevoked_users = [{revoked}]\n'


@pytest.fixture
def issuer() -> Issuer:
    """Two Ed25519 keys: ed-1 in the JWKS at start, ed-2 the one a rotation adds."""
    keys: dict[str, Key] = {kid: ed25519.Ed25519PrivateKey.generate() for kid in ("ed-1", "ed-2")}
    return Issuer(keys=keys)


@pytest.fixture
def node(tmp_path: Path, issuer: Issuer) -> Iterator[ReloadableDaemon]:
    jwks = tmp_path / "jwks.json"
    write_jwks(jwks, issuer, "ed-1")
    daemon = ReloadableDaemon(tmp_path, config(jwks)).start()
    yield daemon
    daemon.stop()


def call(node: ReloadableDaemon, token: str) -> pb.Caller:
    return node.stub.WhoAmI(pb.WhoAmIRequest(), timeout=5, metadata=bearer(token))


def refusal(node: ReloadableDaemon, token: str) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as caught:
        call(node, token)
    return caught.value.code(), caught.value.details()


def test_a_key_added_and_a_user_revoked_by_reload_work_at_once_and_streams_go_on(
    node: ReloadableDaemon, issuer: Issuer, tmp_path: Path
) -> None:
    alice = issuer.mint(claims("alice", "operator", ("ml",)), kid="ed-1")
    mallory = issuer.mint(claims("mallory", "operator"), kid="ed-1")
    dave = issuer.mint(claims("dave", "viewer"), kid="ed-2")
    assert call(node, mallory).user == "mallory"
    assert refusal(node, dave)[0] == grpc.StatusCode.UNAUTHENTICATED  # ed-2 not known yet
    samples, events = open_streams(node.stub, alice)
    try:
        wait_for(more_than(samples, 0), 10, "a first sample batch")
        jwks = tmp_path / "jwks.json"
        write_jwks(jwks, issuer, "ed-1", "ed-2")

        result = node.reload(config(jwks, revoked_users=("mallory",)))

        assert result == ("reload: 1 jwks key added (ed-2); auth revoked_users: 1 added, 0 removed")
        caller = call(node, dave)  # the new key's tokens work at once
        assert (caller.user, caller.authenticated_by) == ("dave", "jwt")
        code, details = refusal(node, mallory)  # the revoked user's next call is refused
        assert code == grpc.StatusCode.UNAUTHENTICATED and "revoked" in details
        seen = samples.count()
        wait_for(more_than(samples, seen + 2), 10, "samples on the stream opened before")
        assert call(node, alice).user == "alice"
        assert samples.error is None and events.error is None and node.alive()

        # Later: the old key retired. Its tokens stop, the streams they opened too (within
        # seconds: #28); the new key's go on.
        renewed = issuer.mint(claims("alice", "operator"), kid="ed-2")
        new_samples, new_events = open_streams(node.stub, renewed)
        wait_for(more_than(new_samples, 0), 10, "a first sample batch on the new key's stream")
        write_jwks(jwks, issuer, "ed-2")
        assert node.reload() == "reload: 1 jwks key removed (ed-1)"
        assert refusal(node, alice)[0] == grpc.StatusCode.UNAUTHENTICATED
        assert call(node, renewed).user == "alice"
        wait_for(lambda: samples.error and events.error, 10, "the old key's streams ended")
        assert samples.error is not None and events.error is not None
        assert samples.error.code() == events.error.code() == grpc.StatusCode.UNAUTHENTICATED
        details = samples.error.details()
        assert details.startswith("stream ended by a config reload: ") and "'ed-1'" in details
        seen = new_samples.count()
        wait_for(more_than(new_samples, seen + 1), 10, "the new key's stream still delivering")
        assert new_samples.error is None and new_events.error is None and node.alive()
        new_samples.close()
        new_events.close()
    finally:
        samples.close()
        events.close()
