"""`gpufleet silence | silences | unsilence`: matcher silences (maintenance windows) from a shell.

`silence` makes one on every node whose host name its `--node` pattern
matches, as the console's New silence dialog does; a `--start` later than now
makes a maintenance window. Silence ids are unique per node, so `unsilence`
takes the node and the id, as `release` takes a reservation's.
"""

from __future__ import annotations

import argparse
import getpass
import sys

from console.fleet.silence_draft import SilenceDraft, matching_targets
from console.fleet.silences import SilenceRow, group_silences
from console.terminal.common import (
    Row,
    act,
    add_end,
    command,
    moment,
    node_rows,
    now_ms,
    print_results,
    print_rows,
    report,
    where,
)
from console.terminal.fleet_calls import EXIT_FAILED, Outcome, on_each, on_fleet, survey
from console.terminal.link import CallFailed, Node, NodeLink, UsageProblem, profile_nodes
from console.terminal.nodes import choose_nodes, lookup_among, pick_from
from console.terminal.table import local_time
from gpufleet.client import calls
from gpufleet.client import messages as pb
from gpufleet.client.security import LinkSecurity


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    silence = command(subparsers, "silence", "keep matching alerts quiet on the matching nodes",
                      run_silence, "--at", done="silenced on every matching node")  # fmt: skip
    arg = silence.add_argument
    arg("--node", dest="node_pattern", default="", metavar="PAT",
        help="node (host name) pattern, exact or glob: gpu-node-0*")  # fmt: skip
    arg("--rule", default="", metavar="PAT", help="rule pattern: gpu_temp, ecc_*")
    arg("--gpu", default="", metavar="N", help="GPU index or glob")
    arg("--severity", default="", metavar="S", help="info, warning, critical or a glob")
    arg("--start", dest="start_ms", type=moment, metavar="TIME",
        help="a maintenance window that begins later: ISO 8601, e.g. 2026-12-02T06:00 "
        "(default: now); --for counts from it")  # fmt: skip
    add_end(silence)
    arg("--comment", required=True, help="why these alerts may stay quiet")
    listing = command(subparsers, "silences", "pending and active silences of the nodes",
                      run_silences, done="every node answered")  # fmt: skip
    listing.add_argument("--all", action="store_true", help="expired ones too (newest first)")
    unsilence = command(subparsers, "unsilence", "end a silence now (it stays listed, expired)",
                        run_unsilence, None, done="ended",
                        failed="the node refused or failed it (wrong role, unknown id, "
                        "a silence already expired)")  # fmt: skip
    unsilence.add_argument("silence_id", metavar="SILENCE_ID",
                           help="e.g. s-7 (from `gpufleet silences`)")  # fmt: skip
    unsilence.add_argument("--everywhere", action="store_true",
                           help="its copies on the profile's other nodes too: the silences "
                           "`silence` made with it (same matchers, author and comment, made "
                           "within a minute), as the console's Expire ends them")  # fmt: skip


def silence_row(link: NodeLink, silence: pb.Silence, now: int) -> Row:
    return {
        **where(link), "id": silence.id, "state": _state(silence, now),
        "matchers": [{"label": m.label, "pattern": m.pattern} for m in silence.matchers],
        "starts_unix_ms": silence.starts_unix_ms, "ends_unix_ms": silence.ends_unix_ms,
        "created_by": silence.created_by, "created_unix_ms": silence.created_unix_ms,
        "comment": silence.comment, "expired_by": silence.expired_by or None,
    }  # fmt: skip


def _state(silence: pb.Silence, now: int) -> str:
    if now >= silence.ends_unix_ms:
        return "expired"
    return "pending" if now < silence.starts_unix_ms else "active"


def _matchers_text(row: Row) -> str:
    return " ".join(f"{m['label']}={m['pattern']}" for m in row["matchers"])


def run_silence(args: argparse.Namespace) -> int:
    now = now_ms()
    draft = SilenceDraft(node=args.node_pattern, rule=args.rule, gpu=args.gpu,
                         severity=args.severity, starts_unix_ms=args.start_ms or 0,
                         duration_ms=args.for_ms, ends_unix_ms=args.until_ms or 0,
                         comment=args.comment)  # fmt: skip
    problem = draft.problem(now)
    if problem:
        raise UsageProblem(problem)
    nodes = choose_nodes(args)
    surveyed, security = nodes.surveyed, nodes.security
    chosen = set(matching_targets(draft.node, [(n.address, n.host) for n, _ in surveyed.results]))
    wanted = draft.request(now)
    request = calls.CREATE_SILENCE.request(
        matchers=[pb.SilenceMatcher(label=m.label, pattern=m.pattern) for m in wanted.matchers],
        starts_unix_ms=wanted.starts_unix_ms, ends_unix_ms=wanted.ends_unix_ms,
        comment=wanted.comment, actor=getpass.getuser())  # fmt: skip

    def create(link: NodeLink) -> Row:
        row = silence_row(link, link.call(calls.CREATE_SILENCE, request), now_ms())
        begins = f" from {local_time(row['starts_unix_ms'])}" if row["state"] == "pending" else ""
        return {**row, "done": f"{link.node.name}: silence {row['id']}{begins} "
                               f"until {local_time(row['ends_unix_ms'])}"}  # fmt: skip

    outcome = on_each([n for n, _ in surveyed.results if n.address in chosen], security, create)
    outcome.failures[:0] = surveyed.failures
    report(outcome, "silence")
    if not chosen and not surveyed.failures:
        names = ", ".join(n.name for n, _ in surveyed.results)
        print(f"gpufleet silence: no node is named like {draft.node!r} (nodes: {names})",
              file=sys.stderr)  # fmt: skip
        return EXIT_FAILED
    return print_results(args, outcome)


def run_silences(args: argparse.Namespace) -> int:
    chosen = choose_nodes(args)
    request = calls.LIST_SILENCES.request(include_expired=args.all)

    def silences_of(link: NodeLink, _: pb.Inventory) -> list[Row]:
        now = now_ms()
        return [silence_row(link, s, now)
                for s in link.call(calls.LIST_SILENCES, request).silences]  # fmt: skip

    outcome = on_fleet(chosen.surveyed, chosen.security, silences_of)
    return print_rows(
        args, outcome, node_rows(outcome), name="silences", key="silences",
        headers=("NODE", "ID", "STATE", "STARTS", "ENDS", "MATCHERS", "BY", "COMMENT"),
        cells=lambda r: [
            r["node"], r["id"], _state_text(r), local_time(r["starts_unix_ms"]),
            local_time(r["ends_unix_ms"]), _matchers_text(r), r["created_by"], r["comment"]],
    )  # fmt: skip


def _state_text(row: Row) -> str:
    return f"expired by {row['expired_by']}" if row["expired_by"] else row["state"]


def run_unsilence(args: argparse.Namespace) -> int:
    if args.everywhere:
        return _unsilence_everywhere(args)
    return act(args, "unsilence", lambda link: _expire(link, args.silence_id))


def _expire(link: NodeLink, silence_id: str) -> Row:
    expired = link.call(calls.EXPIRE_SILENCE, silence_id=silence_id, actor=getpass.getuser())
    row = silence_row(link, expired, now_ms())
    return {**row, "done": f"{link.node.name}: silence {row['id']} ({_matchers_text(row)}) "
                           f"expired by {row['expired_by']}"}  # fmt: skip


def _unsilence_everywhere(args: argparse.Namespace) -> int:
    """The silence on the node named, and its unexpired copies on the profile's nodes."""
    profile, security = profile_nodes(args)
    surveyed = survey(list(dict.fromkeys([*lookup_among(args.target, profile), *profile])),
                      security)  # fmt: skip
    try:
        node = pick_from(args.target, surveyed)
    except CallFailed as failed:
        outcome: Outcome[Row] = Outcome(failures=[failed])
    else:
        listed = _silences_of([n for n, _ in surveyed.results], security)
        copies = _copies(node, args.silence_id, [r for _, rows in listed.results for r in rows])
        nodes = {n.address: n for n, _ in surveyed.results}
        outcome = on_each([nodes[a] for a in copies], security,
                          lambda link: _expire(link, copies[link.target]))  # fmt: skip
        # A node that did not answer may hold a copy still: the run is not done.
        outcome.failures[:0] = surveyed.failures + listed.failures
    report(outcome, "unsilence")
    return print_results(args, outcome)


def _silences_of(nodes: list[Node], security: LinkSecurity) -> Outcome[list[SilenceRow]]:
    # The console's own decoder, so copies group as its silence list groups them; imported
    # here, as it brings numpy, which every other gpufleet command would load for nothing.
    from console.connections.decode import decode_silence

    request = calls.LIST_SILENCES.request(include_expired=False)
    return on_each(nodes, security, lambda link: [
        decode_silence(link.target, s) for s in link.call(calls.LIST_SILENCES, request).silences
    ])  # fmt: skip


def _copies(node: Node, silence_id: str, rows: list[SilenceRow]) -> dict[str, str]:
    """{address: silence id} of the copies to expire; just the one named where it has none.

    A silence the node no longer lists as pending or active is still sent, so the node
    says why it cannot be expired (unknown, already expired).
    """
    wanted = (node.address, silence_id)
    for group in group_silences(rows):
        if wanted in {row.uid for row in group.rows}:
            return dict(row.uid for row in group.rows)
    return dict([wanted])
