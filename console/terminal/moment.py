"""`gpufleet status --at TIME` and `gpufleet alerts --at TIME`: the fleet at a past moment.

Each node answers GetStateAt (docs/daemon.md, "State at a moment"): its GPUs' readings
from its history's finest tier that holds the moment, and the alerts, reservations,
workloads and drains of its journal then. TIME is ISO 8601 (no zone: local time) or
relative to now (-90s, -30m, -2h, -1d); anything else is a usage error (exit 2).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import Any

from console.fleet.durations import UNIT_MS, iso_moment_ms
from console.terminal.common import (
    Row,
    errors,
    node_rows,
    now_ms,
    print_json,
    report,
    where,
)
from console.terminal.fleet_calls import EXIT_FAILED, EXIT_OK, Outcome
from console.terminal.link import NodeLink, UsageProblem
from console.terminal.table import format_table, local_time, mib
from gpufleet.client import calls
from gpufleet.client import messages as pb
from gpufleet.client.words import (
    SEVERITY_NAMES,
    UNKNOWN,
    gpu_health_word,
    health_state_word,
    optional,
    severity_name,
    workload_state_word,
)
from gpufleet.v1.gpu_metrics import GPU_METRICS

RELATIVE = re.compile(r"^-(\d+)([smhd])$")
FORMS = (
    "ISO 8601 such as 2026-03-01T03:12 or 2026-03-01T03:12:00+01:00 (no zone: local "
    "time), or relative to now such as -90s, -30m, -2h, -1d"
)
# A moment this far ahead of this machine's clock is still now (the nodes' clocks differ).
FUTURE_SLACK_MS = 10_000
# `--at -2h`: argparse takes an argument that starts with '-' for an option unless it
# looks like a negative number; these look like one (-2x too: moment_at then says why not).
NEGATIVE = re.compile(r"^-\d+([a-z]+|\.\d+)?$")


def add_at(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--at", type=moment_at, metavar="TIME",
        help=f"{what} at a past moment, from each node's history and journal: {FORMS} "
        "(`--at -2h` or `--at=-2h`)",
    )  # fmt: skip
    parser._negative_number_matcher = NEGATIVE  # type: ignore[attr-defined]


def moment_at(text: str, now: Callable[[], int] = now_ms) -> int:
    """TIME as Unix ms; argparse.ArgumentTypeError (a usage error, exit 2) naming the forms."""
    cleaned = text.strip()
    relative = RELATIVE.match(cleaned)
    if relative:
        return now() - int(relative[1]) * UNIT_MS[relative[2]]
    try:
        at_ms = iso_moment_ms(cleaned)  # no zone: local
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TIME: use {FORMS}") from None
    if at_ms <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is before 1970: use {FORMS}")
    return at_ms


def check_not_ahead(at_ms: int) -> None:
    if at_ms > now_ms() + FUTURE_SLACK_MS:
        raise UsageProblem(f"--at {local_time(at_ms)} is in the future: ask for now or earlier")


def state_of(link: NodeLink, at_ms: int) -> pb.NodeStateAt:
    return link.call(calls.GET_STATE_AT, at_unix_ms=at_ms)


# -- status --at ------------------------------------------------------------------------


def status_at(link: NodeLink, inventory: pb.Inventory, at_ms: int) -> Row:
    """`status`'s row of the node at the moment, with each GPU's readings then."""
    state = state_of(link, at_ms)
    readings = [gpu_row(g) for g in state.gpus]
    temps = [(r["temp_gpu_c"], r["gpu"]) for r in readings if r["temp_gpu_c"] is not None]
    hottest = max(temps, default=None)
    return {
        **where(link), "reachable": True, "host": inventory.hostname, "gpus": len(state.gpus),
        "hottest_gpu": None if hottest is None else hottest[1],
        "hottest_temp_c": None if hottest is None else round(hottest[0], 1),
        "alerts": severity_counts(state.alerts), **moment_keys(state), "readings": readings,
        "reservations": [{"id": r.id, "gpus": list(r.gpu_indices), "holder": r.holder,
                          "until_unix_ms": r.until_unix_ms} for r in state.reservations],
        "workloads": [{"id": w.id, "name": w.name, "owner": w.owner,
                       "state": workload_state_word(w.state), "gpus": list(w.gpu_indices)}
                      for w in state.workloads],
    }  # fmt: skip


def moment_keys(state: pb.NodeStateAt) -> Row:
    return {"at_unix_ms": state.at_unix_ms, "tier": state.tier or None,
            "step_ms": state.step_ms or None, "history_reaches": state.history_reaches,
            "note": state.note or None}  # fmt: skip


def severity_counts(alerts: Any) -> dict[str, int]:
    counts = dict.fromkeys(SEVERITY_NAMES, 0)
    for alert in alerts:
        if severity_name(alert.severity) in counts:
            counts[severity_name(alert.severity)] += 1
    return counts


def gpu_row(gpu: pb.GpuStateAt) -> Row:
    """One GPU at the moment: every catalogue reading (None where absent), its health, drain."""
    sample, condition = gpu.sample, gpu.sample.condition
    health = gpu_health_word(sample.health)
    state = health_state_word(condition.state) if condition.state else UNKNOWN
    return {
        "gpu": gpu.index, "sample_unix_ms": optional(gpu, "sample_unix_ms"),
        **{m.field: optional(sample, m.field) for m in GPU_METRICS},
        "health": None if health == UNKNOWN else health,
        "health_state": None if state == UNKNOWN else state,
        "drained": condition.drained, "drained_by": condition.drained_by or None,
    }  # fmt: skip


def print_status_at(args: argparse.Namespace, outcome: Outcome[Row], rows: list[Row]) -> int:
    report(outcome, "status")
    if args.json:
        print_json({"at_unix_ms": args.at, "nodes": rows})
    else:
        print(f"At {local_time(args.at)}, from each node's history and journal:")
        headers = ("NODE", "ADDRESS", "STATE", "GPUS", "HOTTEST", "CRITICAL", "WARNING",
                   "INFO", "FROM")  # fmt: skip
        print(format_table(headers, [_node_cells(r) for r in rows]))
        gpus = [(r, g) for r in rows if r["reachable"] for g in r["readings"]]
        if gpus:
            print()
            print(format_table(("NODE", "GPU", "TEMP", "UTIL", "POWER", "MEMORY", "SAMPLED",
                                "DRAINED"), [_gpu_cells(r, g) for r, g in gpus]))  # fmt: skip
        for row in rows:
            if row.get("note"):
                print(f"{row['node']}: {row['note']}")
    critical = any(r["alerts"] and r["alerts"]["critical"] for r in rows)
    code = outcome.exit_code()
    return code if code != EXIT_OK else (EXIT_FAILED if critical else EXIT_OK)


def _node_cells(row: Row) -> list[str]:
    if not row["reachable"]:
        return [row["node"], row["address"], "unreachable", *["-"] * 6]
    hot = ("-" if row["hottest_gpu"] is None
           else f"GPU {row['hottest_gpu']} {row['hottest_temp_c']:.0f} °C")  # fmt: skip
    counts = row["alerts"]
    tier = f"{row['tier']} ({row['step_ms'] / 1000:g} s)" if row["tier"] else "no history"
    return [row["node"], row["address"], "up", str(row["gpus"]), hot, str(counts["critical"]),
            str(counts["warning"]), str(counts["info"]), tier]  # fmt: skip


def _gpu_cells(row: Row, gpu: Row) -> list[str]:
    def shown(value: float | None, unit: str) -> str:
        return "-" if value is None else f"{value:.0f} {unit}"

    memory = "-" if gpu["mem_used_bytes"] is None else mib(gpu["mem_used_bytes"])
    sampled = local_time(gpu["sample_unix_ms"]) if gpu["sample_unix_ms"] else "no sample"
    return [row["node"], str(gpu["gpu"]), shown(gpu["temp_gpu_c"], "°C"),
            shown(gpu["util_gpu_pct"], "%"), shown(gpu["power_w"], "W"), memory, sampled,
            "yes" if gpu["drained"] else "no"]  # fmt: skip


# -- alerts --at ------------------------------------------------------------------------


def alerts_at(
    link: NodeLink, at_ms: int, alert_row: Callable[[NodeLink, pb.Alert], Row]
) -> list[Row]:
    """The alerts firing on the node at the moment, as `alerts` lists them, as they were."""
    return [{**alert_row(link, a), "at_unix_ms": at_ms} for a in state_of(link, at_ms).alerts]


def print_alerts_at(
    args: argparse.Namespace, outcome: Outcome[list[Row]], cells: Callable[[Row], list[str]]
) -> int:
    report(outcome, "alerts")
    rows = node_rows(outcome)
    if args.json:
        print_json({"at_unix_ms": args.at, "alerts": rows, "errors": errors(outcome)})
    else:
        print(f"Firing at {local_time(args.at)}:")
        print(format_table(("NODE", "ID", "SEVERITY", "RULE", "GPU", "VALUE/PEAK", "SINCE",
                            "STATE"), [cells(r) for r in rows]))  # fmt: skip
    return outcome.exit_code()
