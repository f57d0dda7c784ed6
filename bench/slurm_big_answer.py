"""Benchmark: the console's memory before and after slurmrestd answers 100 MB.

    .venv/bin/python bench/slurm_big_answer.py                        # this checkout
    .venv/bin/python bench/slurm_big_answer.py --baseline /tmp/before  # and an earlier tree
    .venv/bin/python bench/slurm_big_answer.py --size-mb 10           # a smaller answer

A slurmrestd stand-in (tests/console/slurmrestd_standin.py, in this process)
streams a job list of `--size-mb` MB to GET /jobs: one job whose name is that
long, chunk by chunk, never whole in memory, no Content-Length (as a chunked
or closing answer would be). For each tree (``--baseline DIR`` first, then
this checkout) a fresh console process (slurm_big_answer_console.py: the
tree's own SlurmLink and profile defaults) reads a good stand-in once to warm
up, then reads the big one. Reported per tree: the process's RSS before and
after (the answer kept, as the Slurm panel keeps its last view), its peak
during the read (VmHWM, reset just before), the read's time and what the
console was told.

Writes bench/results/slurm_big_answer.json and .md (``--out``, ``--md``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO_ROOT), str(REPO_ROOT / "protos"), str(REPO_ROOT / "bench")]

from machine import code_version, run_header  # noqa: E402
from results import write_outputs  # noqa: E402
from rpc_transport_procs import Tree, trees  # noqa: E402

from tests.console.slurmrestd_standin import Standin, streamed  # noqa: E402

RESULTS = REPO_ROOT / "bench" / "results"
CONSOLE = Path(__file__).resolve().parent / "slurm_big_answer_console.py"


def measure(tree: Tree, good: str, big: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, str(CONSOLE), good, big], env=tree.env(),
                          capture_output=True, text=True, timeout=900, check=False)  # fmt: skip
    if done.returncode != 0:
        return {"tree": tree.label, "failed": done.stderr.strip()[-500:]}
    return {"tree": tree.label, "path": str(tree.path), **json.loads(done.stdout)}


def report(result: dict[str, Any]) -> str:
    size = result["size_mb"]
    lines = [f"# The console's memory after a {size} MB slurmrestd answer", "",
             "| tree | RSS before | RSS after | peak in the read | read | the console was told |",
             "| --- | ---: | ---: | ---: | ---: | --- |"]  # fmt: skip
    for row in result["runs"]:
        if "failed" in row:
            lines.append(f"| {row['tree']} | failed: {row['failed'][:200]} | | | | |")
            continue
        told = row["outcome"].replace("|", "\\|")[:160]
        lines.append(f"| {row['tree']} | {row['rss_before_mib']} MiB | {row['rss_after_mib']} "
                     f"MiB | {row['peak_mib']} MiB | {row['read_s']} s | {told} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size-mb", type=int, default=100)
    parser.add_argument("--baseline", type=Path, help="an earlier checkout, measured first")
    parser.add_argument("--out", type=Path, default=RESULTS / "slurm_big_answer.json")
    parser.add_argument("--md", type=Path, default=RESULTS / "slurm_big_answer.md")
    args = parser.parse_args()
    good, big = Standin(), Standin()
    big.answers["/jobs"] = streamed(args.size_mb * 1_000_000)
    try:
        runs = [measure(tree, good.url, big.url) for tree in trees(args.baseline)]
    finally:
        good.close()
        big.close()
    result = {**run_header(sys.argv), "code": code_version(REPO_ROOT),
              "size_mb": args.size_mb, "runs": runs}  # fmt: skip
    text = report(result)
    write_outputs("slurm_big_answer", result, args.out, args.md, text)
    print(text)


if __name__ == "__main__":
    main()
