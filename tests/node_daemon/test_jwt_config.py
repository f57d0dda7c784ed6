"""[auth] for signed tokens: a bad JWKS rejects the config; reconfigure swaps the state live."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import grpc
import pytest

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.auth.auth_state import AuthState, Denied
from node_daemon.auth.jwks import parse_jwks
from node_daemon.auth.settings import AuthSettings
from node_daemon.config import ConfigError, load_config_file
from tests.conftest import DaemonFactory
from tests.node_daemon.jwt_mint import Issuer, claims


def config_with(tmp_path: Path, auth: str) -> Path:
    path = tmp_path / "daemon.toml"
    path.write_text(f"[auth]\n{auth}\n", encoding="utf-8")
    return path


def jwks_file(tmp_path: Path, content: str) -> str:
    path = tmp_path / "jwks.json"
    path.write_text(content, encoding="utf-8")
    return f'jwks_file = "{path}"'


ISSUER = Issuer()
EC_KEY = ISSUER.jwks()["keys"][1]


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("{not json", "not valid JSON"),
        ('{"keys": {}}', 'a JWKS is a JSON object {"keys": [...]}'),
        ('{"keys": []}', "no Ed25519 (EdDSA) or P-256 (ES256) signing key"),
        (json.dumps({"keys": [{**EC_KEY, "d": "c2VjcmV0"}]}), "holds a private key"),
        (json.dumps({"keys": [{**EC_KEY, "x": "AAAA"}]}), "'x' must be 32 bytes"),
        (json.dumps({"keys": [{**EC_KEY, "y": EC_KEY["x"]}]}), "kid 'ec-1'"),  # off the curve
        (json.dumps({"keys": [EC_KEY, EC_KEY]}), "a kid appears twice"),
        (
            json.dumps({"keys": [{"kty": "RSA", "n": "AQAB", "e": "AQAB", "kid": "r"}]}),
            "no Ed25519",
        ),
    ],
    ids=["json", "shape", "empty", "private", "short-x", "off-curve", "kid-twice", "only-rsa"],
)
def test_a_bad_jwks_rejects_the_config_naming_file_and_reason(
    tmp_path: Path, content: str, said: str
) -> None:
    config = config_with(tmp_path, jwks_file(tmp_path, content))
    with pytest.raises(ConfigError) as info:
        load_config_file(config)
    assert said in str(info.value) and str(tmp_path / "jwks.json") in str(info.value)
    assert str(config) in str(info.value)


def test_a_missing_jwks_file_is_named(tmp_path: Path) -> None:
    config = config_with(tmp_path, f'jwks_file = "{tmp_path}/nope.json"')
    with pytest.raises(ConfigError, match=r"nope.json: cannot read it: No such file"):
        load_config_file(config)


@pytest.mark.parametrize(
    ("auth", "said"),
    [
        ("leeway = 30", "unknown key(s) leeway in [auth]"),
        ("leeway_s = 3600", "leeway_s must be 0 .. 300"),
        ("revoked_jti = [1]", "revoked_jti must be a list of non-empty strings"),
        ('issuer = ""', "issuer must be a non-empty string"),
    ],
)
def test_bad_auth_keys_are_named(tmp_path: Path, auth: str, said: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config_file(config_with(tmp_path, auth))
    assert said in str(info.value)


def test_the_auth_table_loads_into_settings(tmp_path: Path) -> None:
    lines = [jwks_file(tmp_path, json.dumps(ISSUER.jwks())), 'issuer = "https://idp"',
             'audience = ["gpufleet", "grafana"]', "leeway_s = 5", 'revoked_jti = ["j1"]',
             'revoked_users = ["eve"]', 'user_claim = "preferred_username"']  # fmt: skip
    auth = load_config_file(config_with(tmp_path, "\n".join(lines))).auth
    assert auth.enabled and auth.jwks is not None
    assert [k.kid for k in auth.jwks.keys] == ["ed-1", "ec-1"]
    assert (auth.issuer, auth.audience, auth.leeway_s) == (
        "https://idp",
        ("gpufleet", "grafana"),
        5,
    )
    assert (auth.revoked_jti, auth.revoked_users) == ({"j1"}, {"eve"})
    assert auth.user_claim == "preferred_username"


def settings_for(issuer: Issuer, **more: object) -> AuthSettings:
    return replace(AuthSettings(jwks=parse_jwks(issuer.jwks(), "test")), **more)


def test_a_cached_token_is_not_used_past_its_exp() -> None:
    now = [1_000_000.0]
    state = AuthState(settings_for(ISSUER, leeway_s=0), clock=lambda: now[0])
    token = ISSUER.mint(claims("alice", exp=1_000_060, nbf=999_000, iat=999_000))
    assert state.caller_for_token(token, "peer").user == "alice"  # verified, now cached
    now[0] = 1_000_061.0
    with pytest.raises(Denied, match="JWT expired at"):
        state.caller_for_token(token, "peer")


def test_reconfigure_adds_a_key_and_revokes_a_user_and_ends_only_their_open_streams(
    start_daemon: DaemonFactory,
) -> None:
    old, new = Issuer(), Issuer()
    daemon = start_daemon(gpus=1, auth=settings_for(old))
    eve = old.mint(claims("eve", "viewer"))
    eve_meta = (("authorization", f"Bearer {eve}"),)
    fresh = new.mint(claims("alice", "viewer"), kid="ec-1")
    with grpc.insecure_channel(str(daemon.address)) as channel:
        stub = pb_grpc.NodeServiceStub(channel)
        stream = stub.StreamSamples(pb.StreamSamplesRequest(), metadata=eve_meta, timeout=30)
        next(stream)
        with pytest.raises(grpc.RpcError):
            stub.WhoAmI(
                pb.WhoAmIRequest(), timeout=5, metadata=(("authorization", f"Bearer {fresh}"),)
            )
        both = {"keys": old.jwks()["keys"][:1] + new.jwks()["keys"][1:]}
        settings = replace(daemon.auth_interceptor.settings, jwks=parse_jwks(both, "rotated"),
                           revoked_users=frozenset({"eve"}))  # fmt: skip
        daemon.auth_interceptor.reconfigure(settings)
        reply = stub.WhoAmI(
            pb.WhoAmIRequest(), timeout=5, metadata=(("authorization", f"Bearer {fresh}"),)
        )
        assert reply.user == "alice"
        with pytest.raises(grpc.RpcError) as info:
            stub.WhoAmI(pb.WhoAmIRequest(), timeout=5, metadata=eve_meta)
        assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "revoked" in info.value.details()
        # The revoked user's stream, admitted before, ends too (#28); alice's goes on.
        alice = stub.StreamSamples(
            pb.StreamSamplesRequest(), timeout=30,
            metadata=(("authorization", f"Bearer {fresh}"),),
        )  # fmt: skip
        next(alice)
        with pytest.raises(grpc.RpcError) as ended:
            for _ in stream:
                pass
        assert ended.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert ended.value.details().startswith("stream ended by a config reload: ")
        daemon.auth_interceptor.reconfigure(settings)  # a second reload: alice is kept
        for _ in range(3):
            assert next(alice).gpus
        alice.cancel()


def test_key_sets_compare_by_their_keys() -> None:
    """A reload compares the JWKS in force with the one read: same keys, same set."""
    first, again = parse_jwks(ISSUER.jwks(), "a"), parse_jwks(ISSUER.jwks(), "a")
    assert first == again and hash(first) == hash(again)
    assert first != parse_jwks(Issuer().jwks(), "a")
