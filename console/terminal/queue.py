"""The fleet queue from a terminal: `gpufleet queue`, `gpufleet submit`, `gpufleet move`.

Workloads are named NODE/ID across the fleet ("gpu-node-03/w-12"). `submit`
without --node picks the profile's node with the most GPUs free now (none
computing, none running a workload, none reserved for someone else), so a
script can queue onto the fleet rather than onto a host. `move` is the
console's move (console/connections/workload_move.py): a copy on the target
with an idempotency key, then the original cancelled; run again after an
interruption, it finishes the same move rather than making a second copy.
"""

from __future__ import annotations

import argparse
import getpass
import re
import sys
from typing import Any

from console.connections.workload_move import Move, StepFailed, move_workload
from console.fleet.control import WorkloadRow
from console.fleet.fleet_queue import qualified_id, split_qualified
from console.terminal.common import (
    Row,
    command,
    latest_batch,
    node_rows,
    print_json,
    print_results,
    print_rows,
    report,
)
from console.terminal.fleet_calls import EXIT_FAILED, EXIT_OK, EXIT_USAGE, Outcome, on_each
from console.terminal.link import CallFailed, NodeLink, UsageProblem, profile_nodes
from console.terminal.nodes import choose_nodes, pick_node
from console.terminal.table import local_time
from gpufleet.client import calls
from gpufleet.client import messages as pb
from gpufleet.client.workload_args import add_workload_arguments, workload_argv, workload_env

_DURATION = re.compile(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")


def decode_workload(target: str, message: pb.Workload) -> WorkloadRow:
    # Imported here: the decoder loads numpy (for sample batches), which every other
    # gpufleet command would pay for at start.
    from console.connections.decode import decode_workload as decode

    return decode(target, message)


def parse_limit(text: str) -> int:
    """'90m', '2h', '1d12h', '45s' or plain seconds."""
    if text.isdigit():
        return int(text)
    match = _DURATION.fullmatch(text.strip())
    if not text.strip() or match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a time limit like 90m, 2h or 1d12h")
    days, hours, minutes, seconds = (int(g or 0) for g in match.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    queue = command(subparsers, "queue", "the fleet's workload queue, as one", run_queue,
                    done="every node answered")  # fmt: skip
    queue.add_argument("--all", action="store_true", help="ended workloads too")
    _add_submit(subparsers)
    move = command(subparsers, "move", "move a queued workload to another node", run_move,
                   "--to", done="moved (one copy, on the target)",
                   failed="a node refused or failed a step; the workload stays where it was "
                   "or, started on the target, only there")  # fmt: skip
    move.add_argument("workload", metavar="NODE/ID", help="e.g. gpu-node-03/w-12")
    move.add_argument("--gpu", type=int, action="append", default=[], dest="gpus",
                      metavar="N", help="start it on this GPU of the target (repeat for more; "
                      "default: queue it there)")  # fmt: skip


def _add_submit(subparsers: argparse._SubParsersAction) -> None:
    submit = command(
        subparsers, "submit", "queue a workload on a node of the fleet", run_submit,
        done="queued", failed="no node took it (each refused or failed)",
        description="Queue a command on a node's workload queue: the --node you name, else the "
        "profile's node with the most GPUs free now. It waits there until an operator assigns "
        "it GPUs (drag and drop, --assign) or, with --auto, until the fair queue starts it.",
    )  # fmt: skip
    add_workload_arguments(submit)
    arg = submit.add_argument
    arg("--priority", type=int, default=0, help="higher runs first (default 0)")
    arg("--time-limit", type=parse_limit, default=0, metavar="DURATION",
        help="walltime, e.g. 90m or 2h: TERM, then KILL after the node's grace")  # fmt: skip


# -- queue --------------------------------------------------------------------------------


def _queue_rows(link: NodeLink, include_ended: bool) -> list[Row]:
    reply = link.call(calls.LIST_WORKLOADS, include_ended=include_ended)
    rows = []
    for message in reply.workloads:
        w = decode_workload(link.target, message)
        rows.append({
            "node": link.node.name, "address": link.target, "id": w.id,
            "qualified_id": qualified_id(link.node.name, w.id), "name": w.name,
            "owner": w.owner, "state": w.state.value, "gpus": w.gpu_count,
            "gpu_indices": list(w.gpu_indices), "held_gpu_indices": list(w.held_gpu_indices),
            "priority": w.priority, "time_limit_s": w.time_limit_s,
            "queued_unix_ms": w.queued_unix_ms, "wait_reason": w.wait_reason or None,
            "moved_from": w.moved_from or None, "command": " ".join(w.argv),
        })  # fmt: skip
    return rows


def run_queue(args: argparse.Namespace) -> int:
    chosen = choose_nodes(args)
    outcome = on_each([n for n, _ in chosen.surveyed.results], chosen.security,
                      lambda link: _queue_rows(link, args.all))  # fmt: skip
    outcome.failures[:0] = chosen.surveyed.failures
    rows = node_rows(outcome)
    rank = {"queued": 0, "running": 1}
    rows.sort(key=lambda r: (rank.get(r["state"], 2), -r["priority"], r["queued_unix_ms"]))
    return print_rows(
        args, outcome, rows, name="queue", key="workloads",
        headers=("ID", "NAME", "OWNER", "GPUS", "PRIO", "STATE", "ON GPUS", "QUEUED",
                 "WAITING BECAUSE"),
        cells=lambda r: [
            r["qualified_id"], r["name"], r["owner"], str(r["gpus"]), str(r["priority"]),
            r["state"], _on_gpus(r), local_time(r["queued_unix_ms"]), r["wait_reason"] or ""],
    )  # fmt: skip


def _on_gpus(row: Row) -> str:
    if row["gpu_indices"]:
        return ",".join(map(str, row["gpu_indices"]))
    if row["held_gpu_indices"]:
        return "held " + ",".join(map(str, row["held_gpu_indices"]))
    return "-"


# -- submit -------------------------------------------------------------------------------


def _free_gpus(link: NodeLink) -> tuple[int, int]:
    """(GPUs free now, GPUs in all): nothing computing, no workload, not held for another."""
    batch = latest_batch(link)
    reservations = link.call(calls.LIST_RESERVATIONS)
    me = getpass.getuser()
    held = {g for r in reservations.reservations if r.active and r.holder != me
            for g in r.gpu_indices}  # fmt: skip
    free = [g.index for g in batch.gpus if not g.processes and g.index not in held]
    return len(free), len(batch.gpus)


def run_submit(args: argparse.Namespace) -> int:
    argv = workload_argv(args)
    if not argv:
        raise UsageProblem("give the command after --, e.g. -- python train.py")
    user = getpass.getuser()
    request = calls.SUBMIT_WORKLOAD.request(
        name=args.name, argv=argv, env=workload_env(args), owner=args.owner or user,
        gpu_count=args.gpus,
        min_free_memory_bytes=args.min_memory, auto_place=args.auto, actor=user,
        priority=args.priority, time_limit_s=args.time_limit,
    )  # fmt: skip
    if len(args.node) > 1:
        raise UsageProblem("submit queues on one node: give --node once (or none for the fleet)")
    chosen = choose_nodes(args)
    outcome: Outcome[Row] = Outcome(failures=list(chosen.surveyed.failures))
    candidates = [node for node, _ in chosen.surveyed.results]
    why = ""
    if len(candidates) > 1:
        room = on_each(candidates, chosen.security, _free_gpus)
        if room.results:
            node, (free, total) = max(room.results, key=lambda r: r[1][0])
            candidates, why = [node], f" (chosen: {free} of {total} GPUs free)"
    if candidates:
        done = on_each(candidates[:1], chosen.security,
                       lambda link: _submit_on(link, request, args.assign, why))  # fmt: skip
        outcome.results += done.results
        outcome.failures += done.failures
    report(outcome, "submit")
    print_results(args, outcome)
    return EXIT_OK if outcome.results else (outcome.exit_code() or EXIT_FAILED)


def _submit_on(link: NodeLink, request: pb.SubmitWorkloadRequest, assign: str | None,
               why: str) -> Row:  # fmt: skip
    workload = link.call(calls.SUBMIT_WORKLOAD, request)
    if assign:
        try:
            gpus = [int(g) for g in assign.split(",")]
        except ValueError:
            raise link.failed(f"--assign takes GPU indices like 0,1, got {assign!r}") from None
        workload = link.call(calls.ASSIGN_WORKLOAD, workload_id=workload.id, gpu_indices=gpus,
                             actor=request.actor)  # fmt: skip
    w = decode_workload(link.target, workload)
    where = f" on GPU {', '.join(map(str, w.gpu_indices))}" if w.gpu_indices else ""
    named = qualified_id(link.node.name, w.id)
    return {"node": link.node.name, "address": link.target, "id": w.id, "qualified_id": named,
            "state": w.state.value, "gpu_indices": list(w.gpu_indices),
            "done": f"{named} {w.state.value}{where}{why}"}  # fmt: skip


# -- move ---------------------------------------------------------------------------------


def run_move(args: argparse.Namespace) -> int:
    try:
        source_name, workload_id = split_qualified(args.workload)
    except ValueError as exc:
        raise UsageProblem(str(exc)) from None
    if len(args.node) != 1:
        raise UsageProblem("name the node to move it to: --to NODE")
    addresses, security = profile_nodes(args)
    try:
        source = pick_node(source_name, addresses, security)
        target = pick_node(args.node[0], addresses, security)
    except CallFailed as failed:
        report(Outcome(failures=[failed]), "move")
        return Outcome(failures=[failed]).exit_code()
    if source.address == target.address:
        raise UsageProblem(f"{args.workload} is on {target.name} already")
    links = {n.address: NodeLink(n, security) for n in (source, target)}
    try:
        return _move(args, links, source.address, target.address, workload_id)
    finally:
        for link in links.values():
            link.close()


def _move(args: argparse.Namespace, links: dict[str, NodeLink], source: str, target: str,
          workload_id: str) -> int:  # fmt: skip
    def call(node: str, method: str, request: Any) -> Any:
        link = links[node]
        try:
            return link.call(calls.UNARY[method], request)
        except CallFailed as failed:
            raise StepFailed(failed.reason) from None

    try:
        listing = call(source, "ListWorkloads", calls.LIST_WORKLOADS.request(include_ended=False))
    except StepFailed as exc:
        print(f"gpufleet move: {links[source].node.name}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    found = next((w for w in listing.workloads if w.id == workload_id), None)
    if found is None:
        print(f"gpufleet move: no queued or running workload {args.workload}", file=sys.stderr)
        return EXIT_USAGE
    row = decode_workload(source, found)
    move = Move(row, links[source].node.name, target, links[target].node.name, tuple(args.gpus),
                getpass.getuser())  # fmt: skip
    outcome = move_workload(call, move)
    if args.json:
        print_json({"moved": outcome.ok, "message": outcome.message,
                    "qualified_id": qualified_id(move.target_host, outcome.new_id)
                    if outcome.new_id else None})  # fmt: skip
    else:
        print(outcome.message)
    return EXIT_OK if outcome.ok else EXIT_FAILED
