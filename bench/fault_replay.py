"""Benchmark: a simulated week of GPU faults through the daemon's judgement and self-healing.

    .venv/bin/python bench/fault_replay.py           # 16 nodes x 8 GPUs, 7 simulated days
    .venv/bin/python bench/fault_replay.py --smoke   # 2 nodes, 16 simulated hours, one fault a kind
    .venv/bin/python bench/fault_replay.py --modes off,on --per-kind 2
    .venv/bin/python bench/fault_replay.py --modes on,on-drain-suspect  # drain on predictions

A fleet of simulated nodes (node_daemon/backends/simulated, stepped in simulated
time with SimulatedBackend.advance, no wall clock) plays scripted faults of each
kind (bench/fault_replay_plan.py: failing cooling, ECC storms, remap failures,
bus drops with and without a stutter first, a failing PCIe link, NVLink going
down, leaks of three speeds, and two that must not be flagged: weight loads and an
alloc/free sawtooth) at seeded random times on GPUs of their own; the rest of the
fleet stays healthy, for the false positives. Each node is judged by the daemon's
real HealthAssessor, AlertEngine and Healer (bench/fault_replay_node.py), three
times: healing off, dry-run and on (the same faults, the same seeds).

Per fault kind: how many were caught and predicted (recall), precision, lead time
before the failure and detection delay after the onset; per mode: GPU-minutes at
or above the slowdown temperature, workloads lost, time from a fault to its GPU's
drain, and what self-healing did. Writes bench/results/fault_replay.json and .md
(``--out``, ``--md``; ``--smoke`` writes nothing unless given them).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from fault_replay_plan import KINDS, make_plan
from fault_replay_report import markdown
from fault_replay_run import run_plan
from fault_replay_score import __doc__ as SCORE_DOC
from fault_replay_score import score
from machine import code_version, run_header
from results import write_outputs

from node_daemon.backends.simulated.specs import spec_for
from node_daemon.healing.settings import CommandSettings, HealingSettings, LeakSettings
from node_daemon.health.model import HealthState

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
RESULTS = BENCH / "results"
FULL = {"nodes": 16, "gpus": 8, "days": 7.0, "per_kind": 3}
SMOKE = {"nodes": 2, "gpus": 8, "days": 16 / 24, "per_kind": 1}
DRAIN_SUSPECT = "on-drain-suspect"
MODES = ("off", "dry-run", "on", DRAIN_SUSPECT)
# Jobs change their load phase every half hour or so (the demo's 100 s is too lively).
LOAD_PHASE_S = 1800.0


def healing_for(mode: str) -> HealingSettings:
    """The daemon's defaults, with the opt-in actions a fleet would turn on: leak kills
    (of any process: the simulator's are not gpufleet's own) and GPU resets. The extra
    mode "on, drain suspect" also drains a GPU on a prediction (a suspect state)."""
    if mode == "off":
        return HealingSettings()
    settings = HealingSettings(
        mode="on" if mode == DRAIN_SUSPECT else mode,
        memory_leak=LeakSettings(enabled=True, allow_foreign=True),
        reset=CommandSettings(enabled=True, command=("true",)),
    )
    if mode == DRAIN_SUSPECT:
        states = (HealthState.SUSPECT, *settings.drain.on_states)
        settings = replace(settings, drain=replace(settings.drain, on_states=states))
    return settings


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--smoke", action="store_true", help="2 nodes, 16 h, one fault a kind")
    parser.add_argument("--nodes", type=int, help=f"nodes ({FULL['nodes']})")
    parser.add_argument("--days", type=float, help=f"simulated days ({FULL['days']:g})")
    parser.add_argument("--per-kind", type=int, help=f"faults of each kind ({FULL['per_kind']})")
    parser.add_argument("--seed", type=int, default=15, help="the plan's seed (15)")
    parser.add_argument("--coarse", type=float, default=1800.0,
                        help="seconds per tick on a node playing no fault (1800)")  # fmt: skip
    modes = ", ".join(MODES)
    parser.add_argument("--modes", default="off,dry-run,on",
                        help=f"healing modes to run, of {modes} (off,dry-run,on)")  # fmt: skip
    parser.add_argument("--out", type=Path, help="JSON result (bench/results/fault_replay.json)")
    parser.add_argument("--md", type=Path, help="Markdown report (bench/results/fault_replay.md)")
    args = parser.parse_args(argv)
    size = SMOKE if args.smoke else FULL
    args.nodes = args.nodes or size["nodes"]
    args.days = args.days or size["days"]
    args.per_kind = args.per_kind or size["per_kind"]
    args.gpus = size["gpus"]
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in args.modes if m not in MODES]
    if bad or not args.modes:
        parser.error(f"--modes: choose from {', '.join(MODES)} (got {args.modes})")
    if not args.smoke:
        args.out = args.out or RESULTS / "fault_replay.json"
        args.md = args.md or RESULTS / "fault_replay.md"
    return args


def run(args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    started = time.perf_counter()
    seconds = args.days * 86400
    plan = make_plan(args.nodes, args.gpus, seconds, args.per_kind, args.seed,
                     lambda node: spec_for(None, node))  # fmt: skip
    runs = {}
    for mode in args.modes:
        log = run_plan(plan, mode, healing_for(mode), args.coarse, LOAD_PHASE_S)
        runs[mode] = score(log)
        print(f"fault_replay: healing {mode}: {log.gpu_ticks:,} GPU-ticks in {log.wall_s:.0f} s",
              file=sys.stderr)  # fmt: skip
    fine = sorted({kind.tick_s for kind in KINDS})
    return {
        **run_header(argv),
        "code": code_version(ROOT),
        "config": {
            "nodes": args.nodes,
            "gpus": args.gpus,
            "seconds": seconds,
            "per_kind": args.per_kind,
            "faults": len(plan.faults),
            "seed": args.seed,
            "coarse_s": args.coarse,
            "fine_ticks": "/".join(f"{t:g}" for t in fine) + " s",
            "load_phase_s": LOAD_PHASE_S,
            "modes": args.modes,
        },
        "definitions": _definitions(),
        "runs": runs,
        "wall_s": round(time.perf_counter() - started, 1),
    }


def _definitions() -> list[str]:
    """The score's definitions, from its docstring: one line each."""
    text = (SCORE_DOC or "").split("Definitions (the report repeats them):", 1)[-1]
    items = [" ".join(part.split()) for part in text.split("\n- ") if part.strip()]
    return [item.lstrip("- ") for item in items]


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    result = run(args, argv)
    text = markdown(result)
    print(text)
    write_outputs("fault_replay", result, args.out, args.md, text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
