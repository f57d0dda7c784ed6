"""The console's side of slurm_big_answer.py: its Slurm link reads a good answer, then the big one.

    PYTHONPATH=TREE:TREE/protos python bench/slurm_big_answer_console.py GOOD_URL BIG_URL

Imports only the tree's console (PYTHONPATH picks the tree), so an older checkout
runs it too. One SlurmLink per URL, with the profile's defaults: a read of the
good stand-in first (modules, threads and buffers made), then VmRSS, the peak
reset (/proc/self/clear_refs), the read of the big answer, and VmRSS and VmHWM
again with the answer kept as the console keeps it (SlurmWatch holds the view).
Prints one JSON object.
"""

from __future__ import annotations

import gc
import json
import sys
import time
from pathlib import Path

from console.connections.manager import UpdateInbox
from console.connections.slurm_link import SlurmLink
from console.fleet.updates import QueryResult
from console.settings import SlurmProfile

TOKEN = "bench-token-" + "x" * 40
WAIT_S = 600.0


def status_kib(key: str) -> int:
    line = next(li for li in Path("/proc/self/status").read_text().splitlines()
                if li.startswith(f"{key}:"))  # fmt: skip
    return int(line.split()[1])


def read_once(url: str) -> tuple[str, float, object]:
    """One read through a fresh link: what the console was told, how long, and the answer."""
    inbox = UpdateInbox()
    link = SlurmLink(SlurmProfile(url, "ada"), inbox, lambda: TOKEN)
    started = time.monotonic()
    try:
        link.read(1).result(timeout=WAIT_S)
        outcome = ""
    except Exception as exc:  # the old client's exceptions are lost on its worker: say so
        outcome = f"no answer, the worker raised {type(exc).__name__}: {str(exc)[:120]}"
    seconds = time.monotonic() - started
    link.close()
    answers = [u for u in inbox.drain() if isinstance(u, QueryResult)]
    for answer in answers:
        jobs = len(getattr(answer.payload, "jobs", ()))
        outcome = f"read OK: {jobs} job(s)" if answer.ok else f"error shown: {answer.message}"
    return outcome[:300], seconds, answers


def main() -> None:
    good, big = sys.argv[1:3]
    warm, _, _ = read_once(good)
    gc.collect()
    before = status_kib("VmRSS")
    Path("/proc/self/clear_refs").write_text("5", encoding="ascii")  # VmHWM := VmRSS
    outcome, seconds, kept = read_once(big)
    gc.collect()
    print(json.dumps({
        "warm_up": warm,
        "outcome": outcome,
        "read_s": round(seconds, 3),
        "rss_before_mib": round(before / 1024, 1),
        "rss_after_mib": round(status_kib("VmRSS") / 1024, 1),
        "peak_mib": round(status_kib("VmHWM") / 1024, 1),
        "kept_answers": len(kept),  # type: ignore[arg-type]
    }))  # fmt: skip


if __name__ == "__main__":
    main()
