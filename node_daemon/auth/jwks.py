"""JSON Web Key Sets (RFC 7517): the public keys a node accepts JWTs from.

Only signing keys gpufleet can check are kept: Ed25519 (kty OKP, alg EdDSA) and
P-256 (kty EC, alg ES256). An identity provider's exported set usually holds RSA
and encryption keys too: those are skipped, and remembered by kid so a token
signed with one is refused with a message that says why. The set is read while
the config is parsed: a file that is not a usable JWKS rejects the whole config.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from node_daemon.errors import ConfigError

PublicKey = ed25519.Ed25519PublicKey | ec.EllipticCurvePublicKey
# The JWS "alg" each kind of key signs with. "Ed25519" is RFC 9864's fully specified
# name for EdDSA over Ed25519; both are accepted.
KEY_ALGS = {"OKP": frozenset({"EdDSA", "Ed25519"}), "EC": frozenset({"ES256"})}
MAX_JWKS_BYTES = 1024 * 1024
MAX_KEYS = 100


@dataclass(frozen=True)
class Jwk:
    """One public signing key: its kid (may be empty), kind and the algs it may verify."""

    kid: str
    kty: str  # "OKP" (Ed25519) or "EC" (P-256)
    algs: frozenset[str]
    # Compared (and hashed) by its thumbprint: key objects are not hashable.
    key: PublicKey = field(compare=False)
    thumbprint: str = ""


@dataclass(frozen=True)
class Jwks:
    """A parsed key set: usable keys, and why other kids were skipped."""

    keys: tuple[Jwk, ...]
    skipped: tuple[tuple[str, str], ...] = ()  # (kid, why) of keys gpufleet cannot use
    source: str = ""

    def by_kid(self, kid: str) -> Jwk | None:
        return next((k for k in self.keys if k.kid == kid), None)

    def skipped_reason(self, kid: str) -> str | None:
        return next((why for k, why in self.skipped if k == kid), None)


def b64url_decode(text: str) -> bytes:
    """Base64url without padding (RFC 7515 §2); ValueError on anything else."""
    if not text.isascii() or "=" in text or "+" in text or "/" in text:
        raise ValueError("not base64url")
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except binascii.Error:
        raise ValueError("not base64url") from None
    if b64url_encode(raw) != text:  # spare bits set: one value, one spelling (no malleability)
        raise ValueError("not canonical base64url")
    return raw


def b64url_encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def thumbprint(members: dict[str, str]) -> str:
    """RFC 7638 JWK thumbprint (SHA-256) over the required members, base64url."""
    canonical = json.dumps(members, sort_keys=True, separators=(",", ":"))
    return b64url_encode(hashlib.sha256(canonical.encode()).digest())


def public_jwk(key: PublicKey, kid: str | None = None) -> dict[str, str]:
    """The JWK of a public key (alg and use set; kid defaults to its thumbprint)."""
    if isinstance(key, ed25519.Ed25519PublicKey):
        from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

        raw = key.public_bytes(Encoding.Raw, PublicFormat.Raw)
        members = {"crv": "Ed25519", "kty": "OKP", "x": b64url_encode(raw)}
        alg = "EdDSA"
    else:
        numbers = key.public_numbers()
        members = {"crv": "P-256", "kty": "EC", "x": b64url_encode(numbers.x.to_bytes(32, "big")),
                   "y": b64url_encode(numbers.y.to_bytes(32, "big"))}  # fmt: skip
        alg = "ES256"
    return {**members, "kid": kid or thumbprint(members), "use": "sig", "alg": alg}


def _coordinate(jwk: dict[str, Any], name: str, size: int) -> bytes:
    value = jwk.get(name)
    try:
        raw = b64url_decode(value) if isinstance(value, str) else b""
    except ValueError:
        raw = b""
    if len(raw) != size:
        raise ValueError(f"'{name}' must be {size} bytes, base64url")
    return raw


def _public_key(jwk: dict[str, Any]) -> tuple[PublicKey, dict[str, str]]:
    kty, crv = jwk.get("kty"), jwk.get("crv")
    if kty == "OKP" and crv == "Ed25519":
        x = _coordinate(jwk, "x", 32)
        members = {"crv": crv, "kty": kty, "x": jwk["x"]}
        return ed25519.Ed25519PublicKey.from_public_bytes(x), members
    if kty == "EC" and crv == "P-256":
        x, y = _coordinate(jwk, "x", 32), _coordinate(jwk, "y", 32)
        numbers = ec.EllipticCurvePublicNumbers(
            int.from_bytes(x, "big"), int.from_bytes(y, "big"), ec.SECP256R1()
        )
        members = {"crv": crv, "kty": kty, "x": jwk["x"], "y": jwk["y"]}
        return numbers.public_key(), members  # ValueError for a point not on the curve
    kind = " ".join(str(part) for part in (kty or "?", crv) if part)
    raise _Unusable(f"{kind} key: gpufleet accepts Ed25519 and P-256 only")


class _Unusable(Exception):
    """A well-formed key gpufleet does not verify with (RSA, encryption keys)."""


def _usable(jwk: dict[str, Any]) -> None:
    if jwk.get("d") is not None:
        # A private key in a file every node reads: refuse, whoever made the mistake.
        raise ValueError("holds a private key ('d'): the JWKS must have public keys only")
    use, ops = jwk.get("use"), jwk.get("key_ops")
    if use is not None and use != "sig":
        raise _Unusable(f"use is {use!r}, not 'sig'")
    if ops is not None and (not isinstance(ops, list) or "verify" not in ops):
        raise _Unusable("key_ops does not include 'verify'")


def parse_key(jwk: Any) -> Jwk:
    """One JWK; ValueError for a broken key, _Unusable for one gpufleet skips."""
    if not isinstance(jwk, dict):
        raise ValueError("is not a JSON object")
    kid = jwk.get("kid", "")
    if not isinstance(kid, str) or len(kid) > 256:
        raise ValueError("kid must be a string of at most 256 characters")
    _usable(jwk)
    key, members = _public_key(jwk)
    algs = KEY_ALGS[members["kty"]]
    alg = jwk.get("alg")
    if alg is not None and alg not in algs:
        raise _Unusable(f"alg is {alg!r}, which a {members['crv']} key does not sign with")
    return Jwk(kid, members["kty"], algs if alg is None else _with_alias(alg), key,
               thumbprint(members))  # fmt: skip


def _with_alias(alg: str) -> frozenset[str]:
    return KEY_ALGS["OKP"] if alg in KEY_ALGS["OKP"] else frozenset({alg})


def parse_jwks(data: Any, source: str) -> Jwks:
    """A key set from parsed JSON; ConfigError naming the source and the key."""
    raw_keys = data.get("keys") if isinstance(data, dict) else None
    if not isinstance(raw_keys, list):
        raise ConfigError(f'{source}: a JWKS is a JSON object {{"keys": [...]}} (RFC 7517)')
    if len(raw_keys) > MAX_KEYS:
        raise ConfigError(f"{source}: {len(raw_keys)} keys; at most {MAX_KEYS}")
    keys: list[Jwk] = []
    skipped: list[tuple[str, str]] = []
    for i, raw in enumerate(raw_keys):
        kid = raw.get("kid") if isinstance(raw, dict) else None
        name = f"key {i}" + (f" (kid {kid!r})" if isinstance(kid, str) else "")
        try:
            keys.append(parse_key(raw))
        except _Unusable as why:
            skipped.append((kid if isinstance(kid, str) else "", str(why)))
        except ValueError as exc:
            raise ConfigError(f"{source}: {name} {exc}") from None
    _check_kids(keys, source)
    return Jwks(tuple(keys), tuple(skipped), source)


def _check_kids(keys: list[Jwk], source: str) -> None:
    if not keys:
        raise ConfigError(f"{source}: no Ed25519 (EdDSA) or P-256 (ES256) signing key in the JWKS")
    kids = [k.kid for k in keys]
    if len(keys) > 1 and "" in kids:
        raise ConfigError(f"{source}: with more than one key, every key needs a kid")
    if len(set(kids)) != len(kids):
        raise ConfigError(f"{source}: a kid appears twice in the JWKS")


def load_jwks(path: Path, where: str) -> Jwks:
    """Read and parse a JWKS file; ConfigError names `where`, the file and the reason."""
    source = f"{where}: jwks_file {path}"
    try:
        with path.open("rb") as file:
            raw = file.read(MAX_JWKS_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read it: {exc.strerror}") from None
    if len(raw) > MAX_JWKS_BYTES:
        raise ConfigError(f"{source}: larger than {MAX_JWKS_BYTES} bytes")
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{source}: not valid JSON: {exc}") from None
    return parse_jwks(data, source)
