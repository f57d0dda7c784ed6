"""Minting JWTs offline (`gpufleet token issue`): for fleets without an identity provider.

The signer is the holder of a private key whose public half is in the nodes' JWKS.
"""

from __future__ import annotations

import json
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from node_daemon.auth.jwks import b64url_encode, public_jwk

PrivateKey = ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey


def alg_of(key: PrivateKey) -> str:
    """The JWS alg a private key signs with: EdDSA or ES256; ValueError for others."""
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return "EdDSA"
    if isinstance(key, ec.EllipticCurvePrivateKey) and isinstance(key.curve, ec.SECP256R1):
        return "ES256"
    raise ValueError("the key must be Ed25519 (EdDSA) or EC P-256 (ES256)")


def default_kid(key: PrivateKey) -> str:
    """The kid `gpufleet token keygen` gives a key by default: its RFC 7638 thumbprint."""
    return public_jwk(key.public_key())["kid"]


def _sign(key: PrivateKey, message: bytes) -> bytes:
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return key.sign(message)
    r, s = decode_dss_signature(key.sign(message, ec.ECDSA(hashes.SHA256())))
    return r.to_bytes(32, "big") + s.to_bytes(32, "big")  # JWS wants raw r||s, not DER


def _part(value: dict[str, Any]) -> str:
    return b64url_encode(json.dumps(value, separators=(",", ":")).encode())


def mint(key: PrivateKey, claims: dict[str, Any], kid: str | None = None) -> str:
    """A compact JWS of `claims`, signed by `key`, with kid (default: the thumbprint)."""
    header = {"alg": alg_of(key), "typ": "JWT", "kid": kid or default_kid(key)}
    signed = f"{_part(header)}.{_part(claims)}"
    return f"{signed}.{b64url_encode(_sign(key, signed.encode('ascii')))}"
