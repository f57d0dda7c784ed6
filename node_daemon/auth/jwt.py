"""JWT access tokens (RFC 7519, compact JWS RFC 7515) checked against the node's JWKS.

Written on `cryptography` alone. Only EdDSA (Ed25519) and ES256 are accepted,
whatever the header asks: `alg: none`, HS256 (where a public key would become
an HMAC secret) and every other alg are refused before any key is touched.
Messages say what is wrong with the token and never repeat the token.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from gpufleet.policy import Role, team_name
from node_daemon.auth.jwks import Jwk, Jwks, b64url_decode

MAX_TOKEN_BYTES = 8192
MAX_GROUPS = 256
MAX_NAME = 128
# Arrays and objects nested deeper than this are refused before parsing: a
# header of 2,000 "[" made json.loads raise RecursionError (no ValueError), and
# no token of an identity provider nests beyond a handful of levels.
MAX_JSON_DEPTH = 32
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_JSON_BRACKET = re.compile(rb"[\[\]{}]")
ACCEPTED_ALGS = frozenset({"EdDSA", "Ed25519", "ES256"})
ROLE_CLAIM = "gpufleet_role"
# 9999-12-31T23:59:59Z: a NumericDate past it (or 1e400, which JSON reads as infinity)
# would overflow the clock's and the wire's (int64 ms) types.
MAX_NUMERIC_DATE = 253_402_300_799


class InvalidToken(Exception):
    """Why a JWT is refused, worded for its holder (never containing the token)."""


@dataclass(frozen=True)
class VerifiedToken:
    user: str
    role: Role
    teams: tuple[str, ...]
    expires_unix_s: float
    issuer: str = ""
    token_id: str = ""


@dataclass(frozen=True)
class JwtPolicy:
    """What a token must satisfy besides its signature: from [auth]."""

    jwks: Jwks
    issuer: str | None = None
    audience: tuple[str, ...] = ()
    leeway_s: float = 30.0
    user_claim: str = "sub"


def _strict_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:  # RFC 7515 §4: a duplicate member name is refused, not guessed at
            raise ValueError(f"duplicate member {key[:64]!r}")
        result[key] = value
    return result


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def nests_deeper(data: bytes, limit: int) -> bool:
    """Whether arrays and objects nest more than `limit` deep in JSON text.

    Brackets inside strings do not count; the scan stops at the first level too deep.
    """
    depth = 0
    for bracket in _JSON_BRACKET.finditer(_JSON_STRING.sub(b"", data)):
        depth += 1 if bracket[0] in b"[{" else -1
        if depth > limit:
            return True
    return False


def _json_part(text: str, what: str) -> dict[str, Any]:
    try:
        data = b64url_decode(text)
    except ValueError as exc:
        raise InvalidToken(f"malformed JWT: its {what} is not base64url JSON ({exc})") from None
    if nests_deeper(data, MAX_JSON_DEPTH):
        raise InvalidToken(f"malformed JWT: its {what} nests arrays or objects more than "
                           f"{MAX_JSON_DEPTH} levels deep")  # fmt: skip
    try:
        value = json.loads(data, object_pairs_hook=_strict_object, parse_constant=_no_constants)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        # RecursionError too: whatever the depth check misses must still be a refusal.
        raise InvalidToken(f"malformed JWT: its {what} is not base64url JSON ({exc})") from None
    if not isinstance(value, dict):
        raise InvalidToken(f"malformed JWT: its {what} is not a JSON object")
    return value


def split(token: str) -> tuple[dict[str, Any], dict[str, Any], bytes, bytes]:
    """Header, claims, the signed bytes and the signature; InvalidToken if malformed."""
    if len(token) > MAX_TOKEN_BYTES:
        raise InvalidToken(f"token too long ({len(token)} bytes; at most {MAX_TOKEN_BYTES})")
    parts = token.split(".")
    if len(parts) != 3:
        raise InvalidToken(f"malformed JWT: {len(parts)} dot-separated parts, not 3 (compact JWS)")
    header = _json_part(parts[0], "header")
    claims = _json_part(parts[1], "payload")
    try:
        signature = b64url_decode(parts[2])
    except ValueError:
        raise InvalidToken("malformed JWT: its signature is not base64url") from None
    return header, claims, f"{parts[0]}.{parts[1]}".encode("ascii"), signature


def _check_header(header: dict[str, Any]) -> str:
    alg = header.get("alg")
    if alg not in ACCEPTED_ALGS:
        shown = repr(alg)[:40] if isinstance(alg, str | None) else "not a string"
        raise InvalidToken(f"JWT alg {shown} is not accepted: only EdDSA and ES256 are")
    if "crit" in header:  # RFC 7515 §4.1.11: extensions we do not know must be refused
        raise InvalidToken("JWT header has 'crit' extensions this node does not understand")
    kid = header.get("kid")
    if kid is not None and not isinstance(kid, str):
        raise InvalidToken("malformed JWT: its kid is not a string")
    return str(alg)


def _key_for(jwks: Jwks, header: dict[str, Any], alg: str) -> Jwk:
    kid = header.get("kid")
    if kid is None:
        if len(jwks.keys) > 1:
            raise InvalidToken("JWT has no kid, and this node's JWKS has several keys")
        key = jwks.keys[0]
    else:
        found = jwks.by_kid(kid)
        if found is None:
            skipped = jwks.skipped_reason(kid)
            raise InvalidToken(
                f"JWT kid {kid[:64]!r} is a key this node does not verify with ({skipped})"
                if skipped else f"JWT kid {kid[:64]!r} is not in this node's JWKS "
                "(a new key not yet deployed here, or a retired one)"
            )  # fmt: skip
        key = found
    if alg not in key.algs:
        raise InvalidToken(f"JWT alg {alg} does not match its key ({'/'.join(sorted(key.algs))})")
    return key


def _signature_ok(key: Jwk, signed: bytes, signature: bytes) -> bool:
    try:
        if isinstance(key.key, ed25519.Ed25519PublicKey):
            key.key.verify(signature, signed)
        else:
            if len(signature) != 64:  # JWS ES256 is raw r||s (RFC 7518 §3.4), never DER
                return False
            r, s = int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big")
            key.key.verify(encode_dss_signature(r, s), signed, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        return False
    return True


def _when(unix_s: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(unix_s))


def _number(claims: dict[str, Any], name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidToken(f"JWT claim {name} must be a NumericDate (seconds since 1970)")
    if not 0 <= value <= MAX_NUMERIC_DATE:  # NaN and infinities fail this too
        raise InvalidToken(f"JWT claim {name} is out of range (1970 .. 9999)")
    return float(value)


def _check_times(claims: dict[str, Any], now: float, leeway: float) -> float:
    exp, nbf = _number(claims, "exp"), _number(claims, "nbf")
    if exp is None:
        raise InvalidToken("JWT has no exp claim: tokens for this node must expire")
    if now > exp + leeway:
        raise InvalidToken(f"JWT expired at {_when(exp)}")
    if nbf is not None and now < nbf - leeway:
        raise InvalidToken(f"JWT not valid before {_when(nbf)}")
    return exp


def _text_list(value: Any, name: str) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(v, str) for v in items):
        raise InvalidToken(f"JWT claim {name} must be a string or a list of strings")
    return tuple(items)


def _check_audience(claims: dict[str, Any], policy: JwtPolicy) -> None:
    if policy.issuer is not None and claims.get("iss") != policy.issuer:
        got = claims.get("iss")
        shown = repr(got[:100]) if isinstance(got, str) else "missing"
        raise InvalidToken(f"JWT issuer {shown} is not {policy.issuer!r}")
    if policy.audience:
        audience = _text_list(claims.get("aud", []), "aud")
        if not set(audience) & set(policy.audience):
            wanted = " or ".join(repr(a) for a in policy.audience)
            raise InvalidToken(f"JWT audience {list(audience)[:5]} does not include {wanted}")


def _name(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_NAME:
        raise InvalidToken(f"JWT {what} must be a name of 1 to {MAX_NAME} characters")
    if not value.isprintable():
        raise InvalidToken(f"JWT {what} {value!r} has a control or format character")
    return value


def role_of(value: Any) -> Role:
    """gpufleet_role: one role name, or a list of them (an IdP's role mapper): the highest."""
    if value is None:
        raise InvalidToken(f"JWT has no {ROLE_CLAIM} claim (viewer, operator or admin)")
    names = _text_list(value, ROLE_CLAIM)
    try:
        roles = [Role.parse(n) for n in names]
    except ValueError as exc:
        raise InvalidToken(f"JWT claim {ROLE_CLAIM}: {str(exc)[:120]}") from None
    if not roles:
        raise InvalidToken(f"JWT claim {ROLE_CLAIM} is empty (viewer, operator or admin)")
    return max(roles)


def _identity(claims: dict[str, Any], policy: JwtPolicy, exp: float) -> VerifiedToken:
    user = _name(claims.get(policy.user_claim), f"claim {policy.user_claim}")
    groups = _text_list(claims.get("groups", []), "groups")
    if len(groups) > MAX_GROUPS:
        raise InvalidToken(f"JWT has {len(groups)} groups; at most {MAX_GROUPS}")
    # A group path's leading "/" is dropped, and "team:ml" is team ml (identity.team_name).
    teams = tuple(dict.fromkeys(_name(team_name(g.removeprefix("/")), "group") for g in groups))
    jti, iss = claims.get("jti", ""), claims.get("iss", "")
    if not isinstance(jti, str) or not isinstance(iss, str):
        raise InvalidToken("JWT claims jti and iss must be strings")
    # The jti whole: it is compared with revoked_jti, and a cut id would match no entry
    # (the token's 8 KiB limit bounds it).
    return VerifiedToken(user, role_of(claims.get(ROLE_CLAIM)), teams, exp, iss[:256], jti)


def verify(token: str, policy: JwtPolicy, clock: Callable[[], float] = time.time) -> VerifiedToken:
    """The identity a JWT carries, once signature, times, issuer and audience hold."""
    header, claims, signed, signature = split(token)
    alg = _check_header(header)
    key = _key_for(policy.jwks, header, alg)
    if not _signature_ok(key, signed, signature):
        raise InvalidToken("JWT signature is not valid for this node's JWKS key "
                           f"{key.kid!r}: forged, altered, or signed by another key")  # fmt: skip
    exp = _check_times(claims, clock(), policy.leeway_s)
    _check_audience(claims, policy)
    return _identity(claims, policy, exp)
