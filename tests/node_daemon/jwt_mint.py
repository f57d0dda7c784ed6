"""JWTs for the tests, made with `cryptography` directly: none of the daemon's code.

The daemon's verifier must accept what this (and PyJWT) makes, and refuse the
broken variants built here byte by byte.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

Key = ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def part(value: Any) -> str:
    return b64(json.dumps(value).encode())


def jwk_of(key: Key, kid: str) -> dict[str, str]:
    public = key.public_key()
    if isinstance(public, ed25519.Ed25519PublicKey):
        raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return {"kty": "OKP", "crv": "Ed25519", "x": b64(raw), "kid": kid, "use": "sig",
                "alg": "EdDSA"}  # fmt: skip
    n = public.public_numbers()
    x, y = b64(n.x.to_bytes(32, "big")), b64(n.y.to_bytes(32, "big"))
    return {"kty": "EC", "crv": "P-256", "x": x, "y": y, "kid": kid, "use": "sig", "alg": "ES256"}


def signature(key: Key, message: bytes) -> bytes:
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return key.sign(message)
    r, s = decode_dss_signature(key.sign(message, ec.ECDSA(hashes.SHA256())))
    return r.to_bytes(32, "big") + s.to_bytes(32, "big")


def forged_kid_or_alg(n: int, body: dict[str, Any]) -> str:
    """A token whose header names a kid (even n) or an alg (odd n) no one sent before.

    What an attacker sweeping names sends: each refused with a message of its own.
    The signature is junk: it is never reached.
    """
    header = {"alg": "EdDSA", "kid": f"kid-{n}-{'k' * 48}"} if n % 2 == 0 else {
        "alg": f"alg-{n}-{'a' * 32}", "kid": "ed-1"
    }  # fmt: skip
    return f"{part(header)}.{part(body)}.{b64(b'x' * 64)}"


def claims(user: str, role: str = "operator", groups: tuple[str, ...] = (), **more: Any) -> dict:
    now = int(time.time())
    return {"sub": user, "gpufleet_role": role, "groups": list(groups), "iat": now,
            "nbf": now, "exp": now + 3600, **more}  # fmt: skip


@dataclass
class Issuer:
    """Two signing keys (EdDSA "ed-1", ES256 "ec-1") and a stranger's key."""

    keys: dict[str, Key] = field(
        default_factory=lambda: {
            "ed-1": ed25519.Ed25519PrivateKey.generate(),
            "ec-1": ec.generate_private_key(ec.SECP256R1()),
        }
    )
    stranger: Key = field(default_factory=ed25519.Ed25519PrivateKey.generate)

    def jwks(self) -> dict[str, Any]:
        return {"keys": [jwk_of(key, kid) for kid, key in self.keys.items()]}

    def write_jwks(self, path: Path) -> Path:
        path.write_text(json.dumps(self.jwks()), encoding="utf-8")
        return path

    def mint(self, body: dict[str, Any], kid: str = "ed-1", key: Key | None = None,
             header: dict[str, Any] | None = None) -> str:  # fmt: skip
        key = key or self.keys[kid]
        alg = "EdDSA" if isinstance(key, ed25519.Ed25519PrivateKey) else "ES256"
        head = header if header is not None else {"alg": alg, "typ": "JWT", "kid": kid}
        signed = f"{part(head)}.{part(body)}"
        return f"{signed}.{b64(signature(key, signed.encode()))}"

    def unsigned(self, body: dict[str, Any]) -> str:
        return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(body)}."

    def hs256_with_public_key(self, body: dict[str, Any], kid: str = "ed-1") -> str:
        """The classic confusion attack: the public key (as published) as an HMAC secret."""
        secret = json.dumps(jwk_of(self.keys[kid], kid)).encode()
        signed = f"{part({'alg': 'HS256', 'typ': 'JWT', 'kid': kid})}.{part(body)}"
        mac = hmac.new(secret, signed.encode(), hashlib.sha256).digest()
        return f"{signed}.{b64(mac)}"
