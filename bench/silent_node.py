"""Benchmark: how long the console takes to show a stopped (SIGSTOP) daemon not connected.

    .venv/bin/python bench/silent_node.py                          # 6 trials (~1 min)
    .venv/bin/python bench/silent_node.py --baseline /tmp/before   # and 3 of an earlier tree
    .venv/bin/python bench/silent_node.py --smoke                  # 1 trial: does it run?

A SIGSTOPped daemon is the hard case of a dead node: its kernel still accepts
and acknowledges TCP, so nothing fails on the socket; only the console's
keepalive pings, unanswered, can tell. For each tree (``--baseline DIR``
first, then this checkout) bench/silent_node_probe.py runs with that tree's
code: the daemon as a process and the console's real NodeLink and channel
options (no Qt). Each trial waits until the link streams, stops the daemon at
a random moment, times the link's next state change (RECONNECTING), resumes
it and waits until connected again. Reported: p50, p99 and max over the
trials, and the ratio after/before of the p50. Before those, the daemon's
side (``--client-trials``, ``--baseline-client-trials``): a plain gRPC
client streaming samples is stopped with SIGSTOP, timed until the daemon
drops its connection (goal: within 10 s).

Writes bench/results/silent_node.json and .md (``--out``, ``--md``; --smoke
writes nothing unless asked).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from machine import run_header
from results import md_row, parse_with_outputs, stats_ms, write_outputs
from rpc_transport_procs import BENCH, Tree, measure_trees, ratio

PROBE = BENCH / "silent_node_probe.py"
GOAL_S = 5.0
CLIENT_GOAL_S = 10.0


def measure(tree: Tree, workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    out = workdir / f"{tree.label}.json"
    before = tree.label == "before"
    count = args.baseline_trials if before else args.trials
    clients = args.baseline_client_trials if before else args.client_trials
    argv = [sys.executable, str(PROBE), "--trials", str(count), "--client-trials", str(clients),
            "--give-up", str(args.give_up), "--out", str(out)]  # fmt: skip
    subprocess.run(argv, env=tree.env(), cwd=workdir, check=True, timeout=(count + clients) * 300)
    found = json.loads(out.read_text(encoding="utf-8"))["trials"]
    stats = seconds_stats([t["seconds"] for t in found])
    client_s = json.loads(out.read_text(encoding="utf-8"))["client_trials"]
    return {"tree": str(tree.path), "commit": tree.commit(), "seconds": stats,
            "trials": found, "dead_client": seconds_stats(client_s)}  # fmt: skip


def seconds_stats(values: list[float | None]) -> dict[str, Any]:
    """count, p50, p99, max in seconds of the trials that ended (None: gave up)."""
    ended = [v for v in values if v is not None]
    found = {k: v if k == "count" or v is None else round(v / 1000, 2)
             for k, v in stats_ms(ended).items()}  # fmt: skip
    return {**found, "gave_up": len(values) - len(ended)}


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "# Time for the console to show a SIGSTOPped daemon not connected",
        "",
        f"{result['when']}; `{' '.join(['bench/silent_node.py', *result['argv']])}`; "
        f"{result['machine']['nproc']} x {result['machine']['cpu_model']}. Goal: < {GOAL_S:g} s.",
        "",
        "| tree | commit | trials | p50 | p99 | max | state reported (detail) |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for label, run in result["runs"].items():
        s = run["seconds"]
        first = run["trials"][0] if run["trials"] else {"state": "", "detail": ""}
        seconds = [f"{s[k]} s" for k in ("p50", "p99", "max")]
        state = f"{first['state']} ({first['detail'][:90]})"
        lines.append(md_row(label, run["commit"], len(run["trials"]), *seconds, state))
    if "ratio" in result:
        lines += ["", f"p50 after / before: {result['ratio']}."]
    lines += [
        "",
        "The daemon's side: a streaming client stopped with SIGSTOP, until the daemon drops "
        f"its connection (goal: < {CLIENT_GOAL_S:g} s).",
        "",
        "| tree | trials | p50 | max | gave up |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for label, run in result["runs"].items():
        d = run["dead_client"]
        if d["count"] or d["gave_up"]:
            gave_up = f"{d['gave_up']} (after {result['give_up_s']:g} s)"
            trials = d["count"] + d["gave_up"]
            lines.append(md_row(label, trials, f"{d['p50']} s", f"{d['max']} s", gave_up))
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arg = parser.add_argument
    arg("--trials", type=int, default=6, help="stops of this checkout's daemon")
    arg("--baseline-trials", type=int, default=3,
        help="stops of the baseline's (about a minute each before the fix)")  # fmt: skip
    arg("--client-trials", type=int, default=3, help="streaming clients stopped, this checkout")
    arg("--baseline-client-trials", type=int, default=1, help="the same, the baseline")
    arg("--give-up", type=float, default=120.0, help="seconds a trial waits at most")
    arg("--baseline", type=Path, metavar="DIR", help="an earlier checkout to measure first")
    args = parse_with_outputs(parser, argv, "silent_node", "one trial, nothing written")
    if args.smoke:
        args.trials = args.baseline_trials = args.client_trials = 1
        args.baseline_client_trials = 0
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    result: dict[str, Any] = {
        **run_header(args.argv),
        "give_up_s": args.give_up,
    }
    result["runs"] = runs = measure_trees(args, "gpufleet-silent-", "trials", measure)
    if "before" in runs:
        result["ratio"] = ratio(runs["before"]["seconds"]["p50"], runs["after"]["seconds"]["p50"])
    text = markdown(result)
    print(text)
    write_outputs("silent_node", result, args.out, args.md, text)
    worst, client = runs["after"]["seconds"]["max"], runs["after"]["dead_client"]["max"]
    met = worst is not None and worst < GOAL_S and (client is None or client < CLIENT_GOAL_S)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
