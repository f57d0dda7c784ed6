"""Hostile tokens: whatever the bytes, the verifier answers InvalidToken, never crashes.

Hypothesis builds arbitrary text, valid tokens with one character changed, and
valid tokens with arbitrary JSON in header or payload (re-signed, so the
claims checks, not the signature, must catch them).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from node_daemon.auth.jwks import parse_jwks
from node_daemon.auth.jwt import InvalidToken, JwtPolicy, VerifiedToken, verify
from tests.node_daemon.jwt_mint import Issuer, b64, claims, part, signature

ISSUER = Issuer()
POLICY = JwtPolicy(parse_jwks(ISSUER.jwks(), "fuzz"), issuer=None, audience=("gpufleet",))
VALID = ISSUER.mint(claims("alice", aud="gpufleet"))
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def outcome(token: str) -> VerifiedToken | None:
    try:
        return verify(token, POLICY)
    except InvalidToken as exc:
        assert str(exc) and (len(token) < 16 or token not in str(exc))  # never echoed
        return None


@FUZZ
@given(st.text(max_size=300))
def test_arbitrary_text(text: str) -> None:
    assert outcome(text) is None


@FUZZ
@given(st.integers(0, len(VALID) - 1), st.characters(codec="ascii"))
def test_one_character_changed(at: int, char: str) -> None:
    token = VALID[:at] + char + VALID[at + 1 :]
    # Even base64url's spare low bits count: only the token as signed verifies.
    assert (outcome(token) is None) == (token != VALID)


def resign(header: Any, body: Any) -> str:
    signed = f"{b64(json.dumps(header).encode())}.{part(body)}"
    return f"{signed}.{b64(signature(ISSUER.keys['ed-1'], signed.encode()))}"


@FUZZ
@given(JSON, st.dictionaries(st.sampled_from(["sub", "gpufleet_role", "groups", "exp", "nbf",
                                               "aud", "jti", "iss"]), JSON))  # fmt: skip
def test_signed_but_arbitrary_claims(header_extra: Any, overrides: dict[str, Any]) -> None:
    header = {"alg": "EdDSA", "kid": "ed-1"}
    if isinstance(header_extra, dict):
        header = {**header_extra, **header}
    body = {**claims("alice", aud="gpufleet"), **overrides}
    verified = outcome(resign(header, body))
    if verified is not None:  # whatever passed is well-formed
        assert verified.user and isinstance(verified.teams, tuple) and verified.expires_unix_s


def test_an_infinite_exp_is_refused() -> None:
    # JSON reads 1e400 as infinity: such a token must not live forever (or overflow int64 ms).
    body = json.dumps(claims("alice", aud="gpufleet")).replace('"exp": ', '"exp": 1e400, "x": ')
    signed = f"{part({'alg': 'EdDSA', 'kid': 'ed-1'})}.{b64(body.encode())}"
    token = f"{signed}.{b64(signature(ISSUER.keys['ed-1'], signed.encode()))}"
    with pytest.raises(InvalidToken, match="exp is out of range"):
        verify(token, POLICY)
