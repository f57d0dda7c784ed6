"""`gpufleet token keygen` and `gpufleet token issue`: signed tokens without an identity provider.

keygen makes a key pair: the private key (PEM, mode 0600) stays with whoever
issues tokens; jwks.json (public keys only) goes to every node as
`[auth] jwks_file`. keygen into a directory that already has a jwks.json adds
the new key to it, which is the first step of a rotation. issue prints one
token on stdout and nothing else, so `$(gpufleet token issue ...)` is the token.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from node_daemon.auth.jwks import public_jwk
from node_daemon.auth.jwt_sign import PrivateKey, alg_of, default_kid, mint

JWKS_NAME = "jwks.json"
UNITS_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
DURATION = re.compile(r"(\d+)([smhdw])")


def add_token_subcommands(token: argparse._SubParsersAction) -> None:
    """keygen and issue, under the `token` command of node_daemon/commands/auth.py."""
    keygen = token.add_parser(
        "keygen", help="a signing key pair and the JWKS with its public key",
        description="Make a signing key pair: the private key (0600) for `token issue`, its "
        "public key added to jwks.json for the nodes' [auth] jwks_file. Exit codes: 0 "
        "written; 2 a usage error (bad arguments, an unwritable --out, a kid already there).",
    )  # fmt: skip
    keygen.add_argument("--out", type=Path, required=True, metavar="DIR",
                        help="where to write KID.private.pem (0600) and jwks.json")  # fmt: skip
    keygen.add_argument("--alg", choices=["EdDSA", "ES256"], default="EdDSA",
                        help="the signature algorithm (default EdDSA: Ed25519)")  # fmt: skip
    keygen.add_argument("--kid", help="key id (default: the key's RFC 7638 thumbprint)")
    keygen.set_defaults(run=run_keygen)
    issue = token.add_parser(
        "issue", help="a signed token (JWT) for a user; printed on stdout",
        description="Sign a JWT for a user with a key from `token keygen` and print it. "
        "Exit codes: 0 printed; 2 a usage error (bad arguments, a key that cannot sign).",
    )  # fmt: skip
    arg = issue.add_argument
    arg("--key", type=Path, required=True, metavar="PRIVATE.pem", help="from token keygen")
    arg("--user", required=True, help="the sub claim")
    arg("--role", required=True, choices=["viewer", "operator", "admin"],
        help="the role claim: what the token may do")  # fmt: skip
    arg("--groups", action="append", default=[], metavar="TEAM[,TEAM]", help="teams; repeatable")
    arg("--expires", required=True, type=duration_s, metavar="30d",
        help="lifetime: a number with s, m, h, d or w (e.g. 12h, 30d)")  # fmt: skip
    arg("--kid", help="key id in the header (default: the key's kid in the jwks.json beside "
        "it, else its thumbprint, as keygen names it)")  # fmt: skip
    arg("--issuer", help="the iss claim ([auth] issuer on the nodes)")
    arg("--audience", action="append", default=[], help="the aud claim; repeatable")
    arg("--jti", default="auto", help="token id for revocation: auto (random, the default), "
        "none, or a value")  # fmt: skip
    issue.set_defaults(run=run_issue)


def duration_s(text: str) -> int:
    match = DURATION.fullmatch(text.strip())
    if match is None or int(match.group(1)) == 0:
        raise argparse.ArgumentTypeError(f"--expires must be like 30d, 12h or 90m, got {text!r}")
    return int(match.group(1)) * UNITS_S[match.group(2)]


def _new_key(alg: str) -> PrivateKey:
    if alg == "ES256":
        return ec.generate_private_key(ec.SECP256R1())
    return ed25519.Ed25519PrivateKey.generate()


def _write_private(path: Path, key: PrivateKey) -> None:
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())  # fmt: skip
    # O_EXCL: never overwrite a key; 0600 from the first byte, whatever the umask.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(pem)


def _read_jwks(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {"keys": []}
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
        raise ValueError(f"{path} is not a JWKS ({{'keys': [...]}})")
    return data


def _write_jwks(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.chmod(tmp, 0o644)  # public keys: every node's daemon reads it
    os.replace(tmp, path)


def run_keygen(args: argparse.Namespace) -> int:
    key = _new_key(args.alg)
    jwk = public_jwk(key.public_key(), args.kid)
    out: Path = args.out
    try:
        out.mkdir(parents=True, exist_ok=True)
        jwks = _read_jwks(out / JWKS_NAME)
        if any(k.get("kid") == jwk["kid"] for k in jwks["keys"] if isinstance(k, dict)):
            raise ValueError(f"kid {jwk['kid']!r} is already in {out / JWKS_NAME}")
        private = out / f"{jwk['kid']}.private.pem"
        _write_private(private, key)
        _write_jwks(out / JWKS_NAME, {**jwks, "keys": [*jwks["keys"], jwk]})
    except (OSError, ValueError) as exc:
        print(f"gpufleet token keygen: {exc}", file=sys.stderr)
        return 2
    print(f"private key: {private} (mode 0600; keep it where tokens are issued, never on nodes)")
    print(f"public keys: {out / JWKS_NAME} ({len(jwks['keys']) + 1} key(s); kid {jwk['kid']})")
    print("copy jwks.json to every node as [auth] jwks_file, then reload the daemons")
    return 0


def _load_key(path: Path) -> PrivateKey:
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(key, ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey):
        raise ValueError("the key must be Ed25519 (EdDSA) or EC P-256 (ES256)")
    alg_of(key)  # refuses other curves
    return key


def _kid_beside(path: Path, key: PrivateKey) -> str | None:
    """The kid keygen gave this key: its public half's entry in the jwks.json beside it."""
    mine = public_jwk(key.public_key())
    try:
        keys = _read_jwks(path.with_name(JWKS_NAME))["keys"]
    except (OSError, ValueError):
        return None
    same = ("x", "y", "crv")
    found = (k for k in keys if isinstance(k, dict) and all(k.get(m) == mine.get(m) for m in same))
    kid = next((k.get("kid") for k in found), None)
    return kid if isinstance(kid, str) and kid else None


def claims_of(args: argparse.Namespace, now: int) -> dict[str, Any]:
    groups = [g.strip() for text in args.groups for g in text.split(",") if g.strip()]
    claims: dict[str, Any] = {"sub": args.user, "gpufleet_role": args.role, "groups": groups,
                              "iat": now, "nbf": now, "exp": now + args.expires}  # fmt: skip
    if args.issuer:
        claims["iss"] = args.issuer
    if args.audience:
        claims["aud"] = args.audience[0] if len(args.audience) == 1 else args.audience
    if args.jti != "none":
        claims["jti"] = uuid.uuid4().hex if args.jti == "auto" else args.jti
    return claims


def run_issue(args: argparse.Namespace) -> int:
    try:
        key = _load_key(args.key)
    except (OSError, ValueError, TypeError) as exc:
        print(f"gpufleet token issue: cannot use {args.key} as a signing key: {exc}",
              file=sys.stderr)  # fmt: skip
        return 2
    claims = claims_of(args, int(time.time()))
    kid = args.kid or _kid_beside(args.key, key) or default_kid(key)
    print(mint(key, claims, kid))
    expires = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(claims["exp"]))
    print(f"token for {args.user} ({args.role}), kid {kid}, jti {claims.get('jti', '(none)')}, "
          f"expires {expires}", file=sys.stderr)  # fmt: skip
    return 0
