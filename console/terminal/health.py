"""`gpufleet health | drain | undrain`: each GPU's health from a shell, and drains.

`health` reads GetHealth (viewer) from each node; `drain` and `undrain` call
DrainGpu (operator), which takes a GPU out of placement or returns it, as
the console's Drain action does. States and reasons are the node's own
(docs/health.md).
"""

from __future__ import annotations

import argparse

from console.terminal.common import (
    ONE_NODE_FAILED,
    Row,
    act,
    command,
    errors,
    print_json,
    report,
    where,
)
from console.terminal.fleet_calls import EXIT_FAILED, EXIT_OK, on_fleet
from console.terminal.link import NodeLink, UsageProblem
from console.terminal.nodes import choose_nodes
from console.terminal.table import format_table, local_time
from gpufleet.client import calls
from gpufleet.client import messages as pb
from gpufleet.client.words import health_state_word, optional

# The states that stop new work on a GPU: `health` exits 1 while a GPU is in one.
NEEDS_A_PERSON = frozenset({"needs_reset", "needs_reboot", "needs_inspection"})


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    health = command(subparsers, "health", "each GPU's health state, reasons and drain",
                     run_health,
                     done="every node answered and no GPU needs a reset, reboot or inspection",
                     failed="a node refused or failed the request, or a GPU needs a reset, "
                     "reboot or inspection")  # fmt: skip
    health.add_argument("--problems", action="store_true",
                        help="only GPUs that are not healthy, or are drained")  # fmt: skip
    drain = command(subparsers, "drain", "take a GPU out of placement (no new work)",
                    run_drain, None, done="drained", failed=ONE_NODE_FAILED)  # fmt: skip
    drain.add_argument("gpu", type=int, metavar="GPU", help="the GPU's index on the node")
    drain.add_argument("--reason", required=True, help="what is wrong with the GPU")
    undrain = command(subparsers, "undrain", "return a drained GPU to placement", run_undrain,
                      None, done="returned to placement",
                      failed="the node refused or failed it (a role below operator, a GPU "
                      "not drained)")  # fmt: skip
    undrain.add_argument("gpu", type=int, metavar="GPU", help="the GPU's index on the node")


def state_name(state: int) -> str:
    """'needs_reset': the proto's name, as --json carries it."""
    return health_state_word(state)


def condition_row(
    link: NodeLink, gpu: pb.GpuCondition, record: pb.GpuFaultRecord | None = None
) -> Row:
    """A GPU's row; its fault record's score and incidents where the node sent one (None:
    a daemon that keeps none)."""
    return {
        **where(link), "gpu": gpu.gpu_index, "state": state_name(gpu.state),
        "since_unix_ms": gpu.since_unix_ms, "drained": gpu.drained,
        "drained_by": gpu.drained_by or None, "drain_reason": gpu.drain_reason or None,
        "power_capped_w": optional(gpu, "power_capped_w"),
        "reasons": [_reason_row(r) for r in gpu.reasons],
        "reliability_score": record.reliability_score if record is not None else None,
        "incidents": [_incident_row(i) for i in record.incidents] if record else [],
    }  # fmt: skip


def _incident_row(incident: pb.FaultIncident) -> Row:
    return {"kind": incident.kind, "state": state_name(incident.state),
            "started_unix_ms": incident.started_unix_ms, "last_unix_ms": incident.last_unix_ms,
            "count": incident.count, "xid_codes": list(incident.xid_codes),
            "ended": incident.ended}  # fmt: skip


def _reason_row(reason: pb.HealthReason) -> Row:
    lead = optional(reason, "lead_time_s")
    return {"code": reason.code, "state": state_name(reason.state), "summary": reason.summary,
            "action": reason.action, "since_unix_ms": reason.since_unix_ms,
            "lead_time_s": lead}  # fmt: skip


def _health_of(link: NodeLink, _: pb.Inventory) -> tuple[list[Row], Row]:
    answer = link.call(calls.GET_HEALTH)
    policy = answer.healing
    healing = {**where(link), "healing": {"mode": policy.mode or "off",
               "actions": list(policy.actions),
               "max_actions_per_hour": policy.max_actions_per_hour}}  # fmt: skip
    records = {record.gpu_index: record for record in answer.fault_records}
    return [condition_row(link, gpu, records.get(gpu.gpu_index)) for gpu in answer.gpus], healing


def run_health(args: argparse.Namespace) -> int:
    chosen = choose_nodes(args)
    outcome = on_fleet(chosen.surveyed, chosen.security, _health_of)
    rows = [row for _, (gpus, _) in outcome.results for row in gpus
            if not args.problems or row["state"] != "healthy" or row["drained"]]  # fmt: skip
    nodes = [node for _, (_, node) in outcome.results]
    report(outcome, "health")
    if args.json:
        print_json({"gpus": rows, "nodes": nodes, "errors": errors(outcome)})
    else:
        print(format_table(("NODE", "GPU", "STATE", "SINCE", "DRAINED", "RELIABILITY", "REASONS"),
                           [_cells(r) for r in rows]))  # fmt: skip
        for node in nodes:
            if node["healing"]["mode"] != "off":
                print(f"{node['node']}: self-healing {_healing_text(node['healing'])}")
    code = outcome.exit_code()
    needy = any(r["state"] in NEEDS_A_PERSON for r in rows)
    return code if code != EXIT_OK else (EXIT_FAILED if needy else EXIT_OK)


def _cells(row: Row) -> list[str]:
    drained = "-"
    if row["drained"]:
        drained = f"by {row['drained_by'] or '?'}: {row['drain_reason'] or '-'}"
    if row["power_capped_w"] is not None:
        drained += f" (capped at {row['power_capped_w']:.0f} W)"
    reasons = "; ".join(
        f"{r['code']}: {r['action']}" if r["action"] else r["code"] for r in row["reasons"]
    )
    score = row["reliability_score"]
    reliability = "-" if score is None else f"{score:.0f} ({len(row['incidents'])} incidents)"
    return [row["node"], str(row["gpu"]), row["state"].replace("_", " "),
            local_time(row["since_unix_ms"]), drained, reliability, reasons or "-"]  # fmt: skip


def _healing_text(healing: Row) -> str:
    actions = ", ".join(healing["actions"]) or "no actions"
    return f"{healing['mode']} ({actions}; at most {healing['max_actions_per_hour']} an hour)"


def run_drain(args: argparse.Namespace) -> int:
    if not args.reason.strip():
        raise UsageProblem("--reason: say what is wrong with the GPU")
    return act(args, "drain", lambda link: _drain(link, args.gpu, True, args.reason.strip()))


def run_undrain(args: argparse.Namespace) -> int:
    return act(args, "undrain", lambda link: _drain(link, args.gpu, False, ""))


def _drain(link: NodeLink, gpu: int, drain: bool, reason: str) -> Row:
    answer = link.call(calls.DRAIN_GPU, gpu_index=gpu, drain=drain, reason=reason)
    row = condition_row(link, answer)
    state = row["state"].replace("_", " ")
    what = (
        f"drained by {row['drained_by']}: {row['drain_reason']}"
        if drain
        else ("returned to placement")
    )
    done = f"{link.node.name}: GPU {gpu} {what} ({state})"
    return {**row, "done": done}
