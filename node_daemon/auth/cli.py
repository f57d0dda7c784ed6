"""`gpufleet token new` and `gpufleet audit verify`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from node_daemon.auth.audit import verify
from node_daemon.auth.tokens import new_token, token_hash


def add_auth_commands(subparsers: argparse._SubParsersAction) -> None:
    token = subparsers.add_parser("token", help="create access tokens").add_subparsers(
        dest="token_command", required=True, metavar="new"
    )
    new = token.add_parser("new", help="a new token for a user; prints it once, and its config")
    new.add_argument("--user", required=True)
    new.add_argument("--role", choices=["viewer", "operator", "admin"], default="viewer")
    new.add_argument("--team", action="append", default=[], help="a team of the user; repeat")
    new.add_argument("--expires", metavar="YYYY-MM-DD", help="last day the token works")
    new.set_defaults(run=run_token_new)
    audit = subparsers.add_parser("audit", help="check the audit log").add_subparsers(
        dest="audit_command", required=True, metavar="verify"
    )
    check = audit.add_parser("verify", help="find edited, deleted or reordered audit records")
    where = check.add_mutually_exclusive_group(required=True)
    where.add_argument("--state-dir", type=Path, help="the daemon's state directory")
    where.add_argument("--file", type=Path, help="an audit.sqlite3 file (e.g. a backup)")
    check.set_defaults(run=run_audit_verify)


def run_token_new(args: argparse.Namespace) -> int:
    token = new_token()
    teams = ", ".join(f'"{t}"' for t in args.team)
    print(f"token for {args.user} (shown once; give it to them, keep no copy):\n\n  {token}\n")
    print("add to the daemon's config (only the hash is stored):\n")
    print("[[auth.users]]")
    print(f'name = "{args.user}"')
    print(f'role = "{args.role}"')
    if args.team:
        print(f"teams = [{teams}]")
    print(f'token_sha256 = "{token_hash(token)}"')
    if args.expires:
        print(f"token_expires = {args.expires}")
    return 0


def run_audit_verify(args: argparse.Namespace) -> int:
    path = args.file or args.state_dir / "audit.sqlite3"
    if not path.exists():
        print(f"gpufleet audit verify: no audit log at {path}", file=sys.stderr)
        return 2
    problems = verify(path)
    for problem in problems:
        print(f"TAMPERED: {problem}")
    if not problems:
        print(f"{path}: the audit chain is intact")
    return 1 if problems else 0
