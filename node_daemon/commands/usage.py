"""`gpufleet usage`: usage reports from a node; `gpufleet usage import`: history into its store."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import zoneinfo
from collections.abc import Iterator, Sequence
from pathlib import Path

from gpufleet.client import calls
from gpufleet.client.blocking import NodeClient
from gpufleet.client.channel import bearer_metadata
from gpufleet.client.errors import CallError
from gpufleet.client.security import plain_security
from gpufleet.subcommand import add_subcommand
from gpufleet.v1 import node_pb2 as pb
from node_daemon.journal.schema_version import StateFileTooNew
from node_daemon.usage.importer import (
    CSV_COLUMNS,
    UsageImportError,
    import_file,
    import_sacct_file,
)
from node_daemon.usage.query import BadUsageQuery, parse_day
from node_daemon.usage.report import format_table, write_csv
from node_daemon.usage.sacct import SACCT_EXPORT_COMMAND
from node_daemon.usage.store import USAGE_FILE, AlreadyImported, UsageStore, UsageStoreError

TOKEN_ENV = "GPUFLEET_TOKEN"
CALL_TIMEOUT_S = 30.0
GROUPINGS = {
    "user": pb.USAGE_GROUPING_USER,
    "team": pb.USAGE_GROUPING_TEAM,
    "node": pb.USAGE_GROUPING_NODE,
    "day": pb.USAGE_GROUPING_DAY,
    "account": pb.USAGE_GROUPING_ACCOUNT,
}


USAGE_PAGE = (
    "Ask a node daemon for its usage report (QueryUsage), or, with "
    "`usage import`, add history from before gpufleet to a node's usage store. "
    "Exit codes: 0 the report; 1 the node refused or failed the query, or could not be "
    "reached; 2 a usage error (no or several --node, an unreadable --ca)."
)
IMPORT_PAGE = (
    "Add usage history to the usage store in a node's state directory. "
    f"CSV columns: {','.join(CSV_COLUMNS)}; a CSV file already imported is refused. "
    f"sacct output (any column order, with its header) from: {SACCT_EXPORT_COMMAND}; "
    "stored per job, so a job in overlapping exports is counted once. "
    "Exit codes: 0 imported; 1 the file or the store could not be read or written, or "
    "the CSV was imported before; 2 a usage error (bad arguments)."
)


def add_usage_command(subparsers: argparse._SubParsersAction) -> None:
    summary = "GPU-hours, energy, reservations and cost by user, team, node, day or Slurm account"
    parser = add_subcommand(subparsers, "usage", run_report, summary, USAGE_PAGE)
    arg = parser.add_argument
    # Appended, not stored: a second --node must not silently replace the first.
    arg("--node", action="append", default=[], metavar="HOST:PORT",
        help="the node daemon to ask (one per report)")  # fmt: skip
    arg("--from", dest="from_day", type=_day, metavar="YYYY-MM-DD",
        help="first day, UTC (default: the first recorded)")  # fmt: skip
    arg("--to", dest="to_day", type=_day, metavar="YYYY-MM-DD",
        help="last day, UTC (default: today)")  # fmt: skip
    arg("--by", choices=list(GROUPINGS), default="user", help="group rows by (default user)")
    arg("--csv", action="store_true",
        help="write CSV: a line per day and key, seconds and joules (finance systems)")  # fmt: skip
    arg("--token", default=os.environ.get(TOKEN_ENV),
        help=f"access token (default: ${TOKEN_ENV}), sent as 'authorization: Bearer'")  # fmt: skip
    arg("--ca", type=Path, metavar="FILE",
        help="CA certificate of the node's TLS certificate (connects with TLS)")  # fmt: skip
    _add_import_command(parser.add_subparsers(dest="usage_command", metavar="import"))


def _add_import_command(subparsers: argparse._SubParsersAction) -> None:
    summary = "import usage history (our CSV, or Slurm sacct output) into a node's store"
    parser = add_subcommand(subparsers, "import", run_import, summary, IMPORT_PAGE)
    arg = parser.add_argument
    arg("--state-dir", type=Path, required=True, metavar="DIR",
        help=f"the daemon's state directory (holds {USAGE_FILE})")  # fmt: skip
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--csv", dest="csv_file", type=Path, metavar="FILE",
                        help="usage history in gpufleet's CSV (the columns above)")  # fmt: skip
    source.add_argument("--sacct", dest="sacct_file", type=Path, metavar="FILE",
                        help="Slurm's `sacct -P` output, with its header")  # fmt: skip
    arg("--timezone", type=_zone, metavar="NAME",
        help="zone of sacct's times, e.g. Europe/Berlin (default: this machine's)")  # fmt: skip


def _day(text: str) -> str:
    try:
        return parse_day(text, "the day")
    except BadUsageQuery as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _zone(text: str) -> dt.tzinfo:
    try:
        return zoneinfo.ZoneInfo(text)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise argparse.ArgumentTypeError(f"unknown time zone {text!r}") from None


# Per-call metadata over plaintext: the shared client's (kept by this name for callers).
call_metadata = bearer_metadata


# -- report ---------------------------------------------------------------------------


def run_report(args: argparse.Namespace) -> int:
    if not args.node:
        print("gpufleet usage: --node HOST:PORT is required for a report", file=sys.stderr)
        return 2
    if len(args.node) > 1:
        print(f"gpufleet usage: one --node per report (given {', '.join(args.node)}); "
              "run it once for each node, or use the console's Usage tab for the fleet",
              file=sys.stderr)  # fmt: skip
        return 2
    node = args.node[0]
    request = pb.QueryUsageRequest(
        from_day=args.from_day or "", to_day=args.to_day or "", group_by=GROUPINGS[args.by]
    )
    try:
        # TLS verified against --ca when given, else plaintext; the token either way.
        with NodeClient(node, plain_security(args.token, args.ca)) as client:
            query = _Query(client)
            if args.csv:
                rows = list(query.by_day(request))  # the answers say the currency
                write_csv(sys.stdout, None if args.by == "day" else args.by, rows, query.currency)
            else:
                print(format_table(query(request), args.by))
    except CallError as exc:
        print(f"gpufleet usage: {exc.reason}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"gpufleet usage: cannot read {args.ca}: {exc.strerror}", file=sys.stderr)
        return 2
    return 0


class _Query:
    """QueryUsage calls with the caller's credentials and a deadline."""

    def __init__(self, client: NodeClient) -> None:
        self._client = client
        self.currency = ""  # of the latest answer

    def __call__(self, request: pb.QueryUsageRequest) -> pb.QueryUsageResponse:
        response = self._client.call(calls.QUERY_USAGE, request, deadline_s=CALL_TIMEOUT_S)
        self.currency = response.currency
        return response

    def by_day(self, request: pb.QueryUsageRequest) -> Iterator[tuple[str, pb.UsageRow]]:
        """(day, row) for each day with usage: one call for the days, then one per day."""
        days = self(_with(request, group_by=pb.USAGE_GROUPING_DAY)).rows
        if request.group_by == pb.USAGE_GROUPING_DAY:
            yield from ((row.key, row) for row in days)
            return
        for day in (row.key for row in days):
            for row in self(_with(request, from_day=day, to_day=day)).rows:
                yield day, row


def _with(request: pb.QueryUsageRequest, **changes: object) -> pb.QueryUsageRequest:
    copy = pb.QueryUsageRequest()
    copy.CopyFrom(request)
    for name, value in changes.items():
        setattr(copy, name, value)
    return copy


# -- import -----------------------------------------------------------------------------


def run_import(args: argparse.Namespace) -> int:
    path = args.csv_file or args.sacct_file
    try:
        store = UsageStore(args.state_dir / USAGE_FILE)
    except (UsageStoreError, StateFileTooNew) as exc:
        print(f"gpufleet usage import: {exc}", file=sys.stderr)
        return 1
    try:
        lines = _import_csv(store, path) if args.csv_file else _import_sacct(store, path, args)
    except (UsageImportError, AlreadyImported, UsageStoreError) as exc:
        print(f"gpufleet usage import: {path}: {exc}", file=sys.stderr)
        return 1
    finally:
        store.close()
    print("\n".join(lines))
    return 0


def _import_csv(store: UsageStore, path: Path) -> list[str]:
    summary = import_file(store, path)
    return [
        _import_summary_text(summary.rows, summary.users, summary.first_day, summary.last_day),
        f"{summary.gpu_seconds / 3600:,.2f} GPU-hours added to {store.path}",
    ]


def _import_sacct(store: UsageStore, path: Path, args: argparse.Namespace) -> list[str]:
    summary = import_sacct_file(store, path, args.timezone)
    lines = [
        f"{summary.new} jobs new, {summary.updated} already known (replaced, not added), "
        f"{summary.users} users, {summary.accounts} accounts",
        f"{summary.gpu_seconds / 3600:,.2f} GPU-hours in these jobs, now in {store.path}",
    ]
    if summary.skipped:
        lines.append(f"{summary.skipped} lines skipped (job steps, jobs not ended, "
                     "jobs without GPUs)")  # fmt: skip
    return lines


def _import_summary_text(rows: int, users: int, first: str | None, last: str | None) -> str:
    days = f" from {first} to {last}" if first else ""
    return f"imported {rows} day-user rows for {users} users{days}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run `usage` alone (tests, or `python -m node_daemon.commands.usage`)."""
    parser = argparse.ArgumentParser(prog="gpufleet")
    add_usage_command(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
