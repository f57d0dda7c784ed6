"""`gpufleet token new|keygen|issue` and `gpufleet audit verify`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from node_daemon.auth.audit import Head, NotAnAuditLog, verify
from node_daemon.auth.tokens import new_token, token_hash
from node_daemon.commands.token import add_token_subcommands
from node_daemon.journal.event_journal import read_audit_head

JOURNAL_FILE = "journal.sqlite3"


def add_auth_commands(subparsers: argparse._SubParsersAction) -> None:
    token = subparsers.add_parser(
        "token", help="create access tokens",
        description="Create access tokens: `new` a random token checked by its hash in the "
        "daemon's config, `keygen` a signing key for JWTs, `issue` a signed JWT.",
    ).add_subparsers(dest="token_command", required=True, metavar="new|keygen|issue")  # fmt: skip
    new = token.add_parser(
        "new", help="a new token for a user; prints it once, and its config",
        description="Make a random token for a user and print it once, with the "
        "[[auth.users]] entry (its SHA-256 only) to add to the daemon's config. "
        "Exit codes: 0 printed; 2 a usage error (bad arguments).",
    )  # fmt: skip
    new.add_argument("--user", required=True, help="the user's name, as the daemon logs it")
    new.add_argument("--role", choices=["viewer", "operator", "admin"], default="viewer",
                     help="what the token may do (default viewer)")  # fmt: skip
    new.add_argument("--team", action="append", default=[], help="a team of the user; repeat")
    new.add_argument("--expires", metavar="YYYY-MM-DD", help="last day the token works")
    new.set_defaults(run=run_token_new)
    add_token_subcommands(token)
    audit = subparsers.add_parser(
        "audit", help="check the audit log",
        description="Check a daemon's audit log (`verify`: its hash chain and anchors).",
    ).add_subparsers(dest="audit_command", required=True, metavar="verify")  # fmt: skip
    check = audit.add_parser(
        "verify", help="find edited, deleted or reordered audit records",
        description="Walk the audit log's hash chain and check it against the journal's "
        "anchor and any heads given. Exit codes: 0 the chain is intact; 1 a record was "
        "edited, deleted or reordered (each printed as TAMPERED); 2 a usage error (bad "
        "arguments, no audit log there, a file that is no audit log).",
    )  # fmt: skip
    where = check.add_mutually_exclusive_group(required=True)
    where.add_argument("--state-dir", type=Path, help="the daemon's state directory")
    where.add_argument("--file", type=Path, help="an audit.sqlite3 file (e.g. a backup)")
    check.add_argument("--journal", type=Path, metavar="FILE",
                       help="the event journal whose anchor to check against (default with "
                       "--state-dir: its journal.sqlite3)")  # fmt: skip
    check.add_argument("--head", action="append", default=[], type=parse_head,
                       metavar="SEQ[:HASH]", help="a head seen before (from the daemon's log "
                       "'audit head: record N, hash H' or gpufleet_audit_records_total); "
                       "repeat")  # fmt: skip
    check.set_defaults(run=run_audit_verify)


def parse_head(text: str) -> Head:
    """`12` or `12:9f86d0...` (a log line's record number and hash)."""
    seq, _, digest = text.partition(":")
    if not seq.isdigit() or (digest and len(digest) != 64):
        raise argparse.ArgumentTypeError(f"--head must be SEQ or SEQ:HASH (64 hex), got {text!r}")
    return int(seq), digest


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
    anchors = list(args.head)
    journal = args.journal or (args.state_dir / JOURNAL_FILE if args.state_dir else None)
    if journal is not None and journal.exists():
        anchored = read_audit_head(journal)
        if anchored is not None:
            anchors.append(anchored)
    try:
        problems = verify(path, tuple(anchors))
    except NotAnAuditLog as exc:
        print(f"gpufleet audit verify: {exc}", file=sys.stderr)
        return 2
    for problem in problems:
        print(f"TAMPERED: {problem}")
    if not problems:
        print(f"{path}: the audit chain is intact" + _anchor_note(anchors))
    return 1 if problems else 0


def _anchor_note(anchors: list[Head]) -> str:
    if not anchors:
        return (" (no anchor to check its end against: give --journal or --head, or a log "
                "cut after its newest record looks complete)")  # fmt: skip
    return f" and reaches every anchored head (up to record {max(a[0] for a in anchors)})"
