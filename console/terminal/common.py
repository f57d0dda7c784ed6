"""What every terminal command shares: its parser, errors, output, and when things end.

Exit codes: 0 done, 1 a node refused or failed (`status`, `health`: something
needs a person), 2 a usage error, 3 a node could not be reached. Errors go to
standard error, one line each, naming the node (by host name) and the reason.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from console.fleet.durations import UNIT_MS, iso_moment_ms
from console.terminal.fleet_calls import EXIT_USAGE, Outcome, on_each
from console.terminal.link import (
    CALL_DEADLINE_S,
    CallFailed,
    NodeLink,
    UsageProblem,
    add_node_arguments,
    profile_nodes,
)
from console.terminal.nodes import pick_node
from console.terminal.table import format_table, local_time
from gpufleet.client import calls
from gpufleet.client import messages as pb

# What codes 2, 3 and 130 mean for every command; 0 and 1 each command says itself.
USAGE_WORDS = "a usage error (bad arguments or settings, no nodes, an unknown or ambiguous node)"
UNREACHABLE_WORDS = "a node could not be reached (wins over 1)"
INTERRUPTED_WORDS = "interrupted (^C)"
ONE_NODE_FAILED = "the node refused or failed it (wrong token or role, an unknown id)"
NODE_HELP = "the node: its host name (as `gpufleet status` shows it) or HOST:PORT"
Row = dict[str, Any]


def exit_codes_text(done: str, failed: str) -> str:
    """The command's exit codes, as its --help lists them: what 0 and 1 mean for it."""
    codes = ((0, done), (1, failed), (2, USAGE_WORDS), (3, UNREACHABLE_WORDS),
             (130, INTERRUPTED_WORDS))  # fmt: skip
    return "Exit codes: " + "; ".join(f"{code} {words}" for code, words in codes) + "."


def command(
    subparsers: argparse._SubParsersAction,
    name: str,
    help_: str,
    run: Callable[[argparse.Namespace], int],
    node_flag: str | None = "--node",
    *,
    done: str = "done",
    failed: str = "a node refused or failed the request",
    description: str = "",
) -> argparse.ArgumentParser:
    """A subcommand; `node_flag` None takes one NODE argument (`target`) instead of flags.

    Its --help says what it does (`description`, else `help_`) and its exit codes, 0
    (`done`) and 1 (`failed`) in its own words.
    """
    what = description or f"{help_[0].upper()}{help_[1:]}."
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name, help=help_, description=f"{what} {exit_codes_text(done, failed)}"
    )
    if node_flag is None:
        parser.add_argument("target", metavar="NODE", help=NODE_HELP)
    add_node_arguments(parser, node_flag)
    parser.set_defaults(run=lambda args: _guarded(run, args, name))
    return parser


def _guarded(run: Callable[[argparse.Namespace], int], args: argparse.Namespace, name: str) -> int:
    try:
        return run(args)
    except UsageProblem as exc:
        print(f"gpufleet {name}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:  # ^C: the shell's code for SIGINT, and no traceback
        print(f"gpufleet {name}: interrupted", file=sys.stderr)
        return 130


def report(outcome: Outcome[Any], name: str) -> None:
    for failure in outcome.failures:
        print(f"gpufleet {name}: {failure}", file=sys.stderr)


def errors(outcome: Outcome[Any]) -> list[Row]:
    return [{"node": f.node, "address": f.address or None, "reason": f.reason,
             "unreachable": f.unreachable} for f in outcome.failures]  # fmt: skip


def print_json(data: Row) -> None:
    print(json.dumps(data, indent=2, sort_keys=True))


def act(args: argparse.Namespace, name: str, work: Callable[[NodeLink], Row]) -> int:
    """One action on the node named on the command line, with the profile's credentials."""
    addresses, security = profile_nodes(args)
    try:
        node = pick_node(args.target, addresses, security)
    except CallFailed as failed:
        outcome: Outcome[Row] = Outcome(failures=[failed])
    else:
        outcome = on_each([node], security, work)
    report(outcome, name)
    return print_results(args, outcome)


def node_rows(outcome: Outcome[list[Row]]) -> list[Row]:
    """Every node's rows, node after node."""
    return [row for _, rows in outcome.results for row in rows]


def print_rows(
    args: argparse.Namespace,
    outcome: Outcome[list[Row]],
    rows: Sequence[Row],
    *,
    name: str,
    key: str,
    headers: Sequence[str],
    cells: Callable[[Row], list[str]],
) -> int:
    """The command NAME's listing: the nodes that failed (on standard error), then `rows`
    as a table of their `cells`, or as {KEY: rows, "errors": failures} with --json.

    Returns the outcome's exit code.
    """
    report(outcome, name)
    if args.json:
        print_json({key: list(rows), "errors": errors(outcome)})
    else:
        print(format_table(headers, [cells(row) for row in rows]))
    return outcome.exit_code()


def print_results(args: argparse.Namespace, outcome: Outcome[Row]) -> int:
    """What the actions did: one line each, or {"results", "errors"} with --json."""
    rows = [row for _, row in outcome.results]
    if args.json:
        print_json({"results": rows, "errors": errors(outcome)})
    else:
        for row in rows:
            print(row["done"])
    return outcome.exit_code()


def where(link: NodeLink) -> Row:
    """The keys that name a node in every row: as people read it, and its address."""
    return {"node": link.node.name, "address": link.target}


# -- when -----------------------------------------------------------------------------

DURATION = re.compile(r"^(\d+)([smhd])$")


def add_end(parser: argparse.ArgumentParser) -> None:
    end = parser.add_mutually_exclusive_group(required=True)
    end.add_argument("--for", dest="for_ms", type=duration, metavar="DURATION",
                     help="how long: 90s, 30m, 2h, 1d")  # fmt: skip
    end.add_argument("--until", dest="until_ms", type=moment, metavar="TIME",
                     help="when it ends: ISO 8601, e.g. 2026-12-01T18:00 (local unless "
                     "it names a zone)")  # fmt: skip


def duration(text: str) -> int:
    match = DURATION.match(text.strip())
    if not match or int(match[1]) == 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a duration such as 90s, 30m, 2h or 1d")
    return int(match[1]) * UNIT_MS[match[2]]


def moment(text: str) -> int:
    """ISO 8601 to Unix ms; a time without a zone is local."""
    try:
        return iso_moment_ms(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a time such as 2026-12-01T18:00") from None


def now_ms() -> int:
    return int(time.time() * 1000)


def end_ms(args: argparse.Namespace, now: int) -> int:
    end: int = now + args.for_ms if args.for_ms is not None else args.until_ms
    if end <= now:
        raise UsageProblem(f"the end, {local_time(end)}, is not in the future")
    return end


# -- reading ---------------------------------------------------------------------------


def latest_batch(link: NodeLink, inventory: pb.Inventory | None = None) -> pb.SampleBatch:
    """The node's next sweep (metrics and its newest process lists).

    The stream's deadline covers two sampling periods, so a node that samples
    slowly (a long `interval`) is waited for, not called unreachable.
    """
    if inventory is None:
        inventory = link.call(calls.GET_INVENTORY)
    deadline_s = max(CALL_DEADLINE_S, 2 * inventory.sample_interval_ms / 1000 + 2)
    for batch in link.stream(calls.STREAM_SAMPLES, deadline_s=deadline_s):
        if not batch.replayed:
            return batch
    raise link.failed("the sample stream ended without a sample")
