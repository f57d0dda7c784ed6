"""Benchmark: CPU of one daemon sweep of 8 simulated GPUs, read and encoded for the wire.

    python bench/sweep_encode.py                       # this checkout
    python bench/sweep_encode.py --baseline DIR        # and an earlier checkout, alternating
    python bench/sweep_encode.py --smoke               # 100 sweeps a round: does it run?

Every node daemon does this once a tick; a fleet host running 125 of them (as
bench/console_fleet.py does) spends most of its CPU here. Each measurement runs
in a fresh interpreter: 200 warm-up sweeps, then 7 rounds of 2,000, CPU time
(time.process_time) per sweep; it prints the fastest round and the median, and
the backend read alone. With --baseline, checkouts alternate `--rounds` times so
that both see the same machine; compare them as ratios within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]

# Runs inside the measured checkout: the module paths differ across versions.
_MEASURE = r"""
import importlib, json, sys, time
SWEEPS = int(sys.argv[1])
from node_daemon.backends.simulated import SimulatedBackend
try:
    wire = importlib.import_module("node_daemon.sampling.wire")
except ImportError:
    wire = importlib.import_module("node_daemon.wire")
backend = SimulatedBackend(gpu_count=8, seed=3, model="h100")
backend.open()
def sweep(tick):
    readings, processes = backend.read_gpus(), backend.read_processes()
    return wire.batch_message(tick * 1000, tick, readings, processes).SerializeToString()
for tick in range(200):
    sweep(tick)
rounds = []
for _ in range(7):
    start = time.process_time()
    for tick in range(SWEEPS):
        sweep(tick)
    rounds.append((time.process_time() - start) / SWEEPS * 1e6)
start = time.process_time()
for _ in range(SWEEPS):
    backend.read_gpus()
read = (time.process_time() - start) / SWEEPS * 1e6
print(json.dumps({"min_us": min(rounds), "median_us": sorted(rounds)[3], "read_us": read}))
"""


def measure(checkout: Path, sweeps: int) -> dict[str, float]:
    paths = [str(checkout), str(checkout / "protos")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    done = subprocess.run([sys.executable, "-c", _MEASURE, str(sweeps)], env=env, cwd=checkout,
                          capture_output=True, text=True, check=True)  # fmt: skip
    result: dict[str, float] = json.loads(done.stdout)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="an earlier checkout to compare with")
    parser.add_argument("--rounds", type=int, default=3, help="alternations (default 3)")
    parser.add_argument("--smoke", action="store_true", help="100 sweeps a round")
    args = parser.parse_args()
    trees = [("this", REPO_ROOT)] + ([("baseline", args.baseline)] if args.baseline else [])
    print("checkout   sweep+wire min   median   backend read")
    for _ in range(args.rounds if args.baseline else 1):
        for name, tree in trees:
            r = measure(tree, 100 if args.smoke else 2000)
            print(f"{name:9}  {r['min_us']:10.0f} µs  {r['median_us']:6.0f} µs"
                  f"  {r['read_us']:8.0f} µs")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
