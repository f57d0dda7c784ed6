"""Benchmark: the on-disk metric history's size per node and its cost per tick.

    python bench/history_disk.py            # a simulated day of an 8-GPU node at 1 s
    python bench/history_disk.py --smoke    # a simulated hour: does it run?
    python bench/history_disk.py --hours 6 --gpus 4

Writes the ticks of the simulated backend (8 H100s, seed 3) through the real
HistoryStore (node_daemon.history) with injected time: each tick is stamped one
second after the last, so a day takes minutes, not a day. It flushes every 5
ticks as the daemon's writer thread does (flush_interval_s 5) and reports:

- the append, the only part on the sampler's tick path (µs, median and p99);
- the writer's flush (encode, downsample, commit, prune), per flush and per tick;
- the file on disk after the run (checkpointed), by tier, and per node per day;
- the 30-day steady state, projected from the bytes per point of each tier (the
  1 min tier holds 30 days of points, the 10 s tier one day, raw one hour);
- what a few QueryHistory answers cost to build (read, decode, series), without
  the network: the console's plot of one metric, and everything for a day.

Times are CPU time of the calling thread (time.thread_time), not wall time: a
shared machine's load does not inflate them.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO_ROOT), str(REPO_ROOT / "protos")]

from gpufleet.v1 import node_pb2 as pb  # noqa: E402
from node_daemon.backends.simulated import SimulatedBackend  # noqa: E402
from node_daemon.history.query import answer_query, parse_query  # noqa: E402
from node_daemon.history.settings import HistorySettings  # noqa: E402
from node_daemon.history.store import HistoryStore  # noqa: E402

FLUSH_EVERY_TICKS = 5
T0_MS = 1_800_000_000_000  # any start; a multiple of a minute
MIB = 1024 * 1024


def write(path: Path, gpus: int, ticks: int) -> tuple[list[float], list[float]]:
    """Write `ticks` ticks; (append µs, flush ms) of each."""
    backend = SimulatedBackend(gpu_count=gpus, seed=3, model="h100")
    backend.open()
    store = HistoryStore(path, HistorySettings(), raw_step_ms=1000)
    appends, flushes = [], []
    for tick in range(ticks):
        readings = backend.advance(1.0)
        started = time.thread_time()
        store.append(T0_MS + tick * 1000, readings)
        appends.append((time.thread_time() - started) * 1e6)
        if tick % FLUSH_EVERY_TICKS == FLUSH_EVERY_TICKS - 1:
            started = time.thread_time()
            store.flush()
            flushes.append((time.thread_time() - started) * 1e3)
    store.close()
    return appends, flushes


def tier_bytes(path: Path) -> dict[int, tuple[int, int]]:
    """Per tier: (points, bytes of their values)."""
    with sqlite3.connect(path) as db:
        rows = db.execute(
            "SELECT tier, COUNT(*), SUM(length(mean) + IFNULL(length(max), 0)) FROM points "
            "GROUP BY tier"
        ).fetchall()
    return {tier: (count, size) for tier, count, size in rows}


def report(path: Path, hours: float, appends: list[float], flushes: list[float]) -> None:
    ticks = len(appends)
    on_disk = path.stat().st_size
    tiers = tier_bytes(path)
    values = sum(size for _, size in tiers.values())
    overhead = on_disk / values if values else 1.0
    p99 = statistics.quantiles(appends, n=100)[98]
    print(f"{ticks} ticks ({hours:g} h at 1 s), flush every {FLUSH_EVERY_TICKS} ticks")
    print(f"append (tick path): median {statistics.median(appends):.1f} µs, p99 {p99:.1f} µs")
    per_tick = sum(flushes) / ticks * 1e3
    slowest = statistics.quantiles(flushes, n=100)[98]
    print(f"flush (writer thread): median {statistics.median(flushes):.2f} ms, p99 "
          f"{slowest:.1f} ms, max {max(flushes):.1f} ms; {per_tick:.0f} µs per tick")  # fmt: skip
    names = {0: "raw", 1: "10s", 2: "1m"}
    for tier, (count, size) in sorted(tiers.items()):
        print(f"  tier {names[tier]:>3}: {count:6d} points, {size / count:6.0f} B per point")
    print(f"file after {hours:g} h: {on_disk / MIB:.2f} MiB (values {values / MIB:.2f} MiB, "
          f"pages and keys x{overhead:.2f})")  # fmt: skip
    per_point = {tier: size / count for tier, (count, size) in tiers.items()}
    if hours >= 24:
        print(f"per node per day: {on_disk / MIB:.1f} MiB (the first day's file)")
    settings = HistorySettings()
    steady = (
        per_point.get(0, 0) * settings.raw_retention_s
        + per_point.get(1, 0) * settings.ten_second_retention_s / 10
        + per_point.get(2, 0) * settings.minute_retention_s / 60
    ) * overhead
    print(f"30-day steady state (projected): {steady / MIB:.0f} MiB per node "
          f"(max_bytes default {settings.max_bytes / MIB:.0f} MiB)")  # fmt: skip


QUERIES = (
    ("last hour, temp_gpu_c, 8 GPUs", 3600, ["temp_gpu_c"], 2000),
    ("last hour raw, temp_gpu_c, 8 GPUs", 3600, ["temp_gpu_c"], 20_000),
    ("24 h, temp_gpu_c, 8 GPUs", 86400, ["temp_gpu_c"], 2000),
    ("24 h, every metric, 8 GPUs", 86400, [], 2000),
)


def time_queries(path: Path, ticks: int) -> None:
    store = HistoryStore(path, HistorySettings(), raw_step_ms=1000)
    end_ms = T0_MS + (ticks - 1) * 1000
    for label, span_s, metrics, max_points in QUERIES:
        request = pb.QueryHistoryRequest(start_unix_ms=end_ms - span_s * 1000, end_unix_ms=end_ms,
                                         metrics=metrics, max_points=max_points)  # fmt: skip
        started = time.thread_time()
        answer = answer_query(store, parse_query(request, end_ms, range(8)))
        took_ms = (time.thread_time() - started) * 1e3
        size = answer.ByteSize() / MIB
        print(f"query {label}: tier {answer.tier}, {len(answer.timestamps_unix_ms)} points, "
              f"{size:.2f} MiB, {took_ms:.0f} ms of CPU")  # fmt: skip
    store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=24.0, help="simulated hours (24)")
    parser.add_argument("--gpus", type=int, default=8, help="GPUs of the node (8)")
    parser.add_argument("--smoke", action="store_true", help="one simulated hour")
    args = parser.parse_args()
    hours = 1.0 if args.smoke else args.hours
    with tempfile.TemporaryDirectory(prefix="gpufleet-history-bench-") as tmp:
        path = Path(tmp) / "history.sqlite3"
        appends, flushes = write(path, args.gpus, round(hours * 3600))
        report(path, hours, appends, flushes)
        if args.gpus == 8:
            time_queries(path, len(appends))
    return 0


if __name__ == "__main__":
    sys.exit(main())
