"""Benchmark: unary calls and health checks while 100 console-like subscribers want streams.

    .venv/bin/python bench/stream_starvation.py                          # 100 subscribers
    .venv/bin/python bench/stream_starvation.py --baseline /tmp/before   # and an earlier tree
    .venv/bin/python bench/stream_starvation.py --smoke                  # seconds: does it run?

For each tree (``--baseline DIR`` first, then this checkout) a fresh daemon
process (simulated backend, 2 GPUs, ``max_streams`` 64 as shipped) and a
subscriber process (bench/stream_starvation_subscribers.py, the tree's own
channel options): K subscribers, each its own channel, each holding a sample
and an event stream as a console does, and retrying with the console's
backoff when refused. This checkout runs twice: as shipped (at most 16
streams per client address, and every subscriber here shares 127.0.0.1) and
with ``max_streams_per_client = 1024``, so that the total limit is what binds.

After ``--settle`` seconds, this process calls the daemon for ``--seconds``:
GetInventory, ListAlerts, WhoAmI and the health Check in turn, one every
``--gap`` seconds, each with the console's 5 s deadline, on a channel of its
own. Reported: the share of calls answered OK, their latency (p50, p99, max),
the most streams the subscribers held at once, and the refusals they got.

Writes bench/results/stream_starvation.json and .md (``--out``, ``--md``;
--smoke writes nothing unless asked).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from machine import run_header
from results import parse_with_outputs, percent, stats_ms, write_outputs
from rpc_transport_procs import BENCH, Tree, TreeDaemon, wait_for_file

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc

SUBSCRIBERS = BENCH / "stream_starvation_subscribers.py"
DEADLINE_S = 5.0


def unary_calls(channel: grpc.Channel) -> list[tuple[str, Callable[[], object]]]:
    node, health = pb_grpc.NodeServiceStub(channel), health_pb2_grpc.HealthStub(channel)
    return [
        ("GetInventory", lambda: node.GetInventory(pb.GetInventoryRequest(), timeout=DEADLINE_S)),
        ("ListAlerts", lambda: node.ListAlerts(pb.ListAlertsRequest(), timeout=DEADLINE_S)),
        ("WhoAmI", lambda: node.WhoAmI(pb.WhoAmIRequest(), timeout=DEADLINE_S)),
        ("health Check", lambda: health.Check(health_pb2.HealthCheckRequest(), timeout=DEADLINE_S)),
    ]


def call_for(address: str, seconds: float, gap_s: float) -> dict[str, Any]:
    """Unary calls in turn for `seconds`: latencies of the OK ones, codes of all."""
    latencies: list[float] = []
    codes: Counter[str] = Counter()
    with grpc.insecure_channel(address) as channel:
        calls = unary_calls(channel)
        end, i = time.monotonic() + seconds, 0
        while time.monotonic() < end:
            name, call = calls[i % len(calls)]
            started = time.monotonic()
            try:
                call()
                latencies.append(time.monotonic() - started)
                codes["OK"] += 1
            except grpc.RpcError as exc:
                codes[f"{name}: {exc.code().name}: {(exc.details() or '')[:60]}"] += 1
            i += 1
            time.sleep(max(0.0, started + gap_s - time.monotonic()))  # pacing, not syncing
    total = sum(codes.values())
    return {
        "calls": total,
        "ok_pct": percent(codes["OK"], total),
        "latency_ms": stats_ms(latencies),
        "codes": dict(codes.most_common()),
    }


class Subscribers:
    """The subscriber process for one tree; `stop()` returns its stats."""

    def __init__(self, tree: Tree, workdir: Path) -> None:
        self._tree, self._dir = tree, workdir
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, address: str, count: int, settle_s: float) -> None:
        ready, log = self._dir / "subscribers.ready", self._dir / "subscribers.log"
        argv = [sys.executable, str(SUBSCRIBERS), "--target", address, "--count", str(count),
                "--ready-file", str(ready), "--stats-file", str(self._dir / "stats.json"),
                "--settle", str(settle_s)]  # fmt: skip
        with log.open("wb") as out:
            self._proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT,
                env=self._tree.env(), cwd=self._dir,
            )  # fmt: skip
        wait_for_file(ready, self._proc, log, settle_s + 60)

    def stop(self) -> dict[str, Any]:
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.terminate()
            proc.wait(60)
        stats = self._dir / "stats.json"
        return dict(json.loads(stats.read_text(encoding="utf-8"))) if stats.exists() else {}


def measure(tree: Tree, label: str, config: str, workdir: Path, args: argparse.Namespace) -> dict:
    where = workdir / label.replace(" ", "_")
    subscribers = Subscribers(tree, where)
    with TreeDaemon(tree, where, config) as daemon:
        try:
            subscribers.start(daemon.address, args.subscribers, args.settle)
            calls = call_for(daemon.address, args.seconds, args.gap)
        finally:
            held = subscribers.stop()
    return {"tree": str(tree.path), "commit": tree.commit(), "config": config.strip(),
            **calls, "subscribers": held}  # fmt: skip


def runs_of(baseline: Path | None) -> list[tuple[str, Tree, str]]:
    """(label, tree, [daemon] config lines) for each run."""
    after = Tree("after", BENCH.parent)
    found = [("before", Tree("before", baseline.resolve()), "")] if baseline else []
    return [*found, ("after", after, ""),
            ("after, per client 1024", after, "max_streams_per_client = 1024\n")]  # fmt: skip


def markdown(result: dict[str, Any]) -> str:
    c = result["config"]
    lines = [
        f"# Unary calls with {c['subscribers']} subscribers wanting streams",
        "",
        f"{result['when']}; `{' '.join(['bench/stream_starvation.py', *result['argv']])}`; "
        f"{result['machine']['nproc']} x {result['machine']['cpu_model']}; "
        f"{c['seconds']} s of calls, one every {c['gap']} s, after {c['settle']} s.",
        "",
        "| run | commit | unary OK | p50 | p99 | max | streams held (most) | refusals "
        "(subscribers) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for label, run in result["runs"].items():
        lat, subs = run["latency_ms"], run["subscribers"]
        refusals = "; ".join(f"{n:,} x {m[:110]}" for m, n in subs.get("refusals", {}).items())
        lines.append(
            f"| {label} | {run['commit']} | {run['ok_pct']} % of {run['calls']:,} | "
            f"{_ms(lat['p50'])} | {_ms(lat['p99'])} | {_ms(lat['max'])} | "
            f"{subs.get('most_streams_held')} | {refusals or 'none'} |"
        )
    failed = {k: v["codes"] for k, v in result["runs"].items() if v["ok_pct"] < 100}
    if failed:
        lines += ["", "Unary calls that failed:", "", "```", json.dumps(failed, indent=1), "```"]
    return "\n".join(lines) + "\n"


def _ms(value: object) -> str:
    return "n/a" if value is None else f"{value} ms"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arg = parser.add_argument
    arg("--subscribers", type=int, default=100)
    arg("--seconds", type=float, default=20.0, help="seconds of unary calls measured")
    arg("--gap", type=float, default=0.05, help="seconds from one call's start to the next")
    arg("--settle", type=float, default=5.0, help="seconds for the subscribers to connect")
    arg("--baseline", type=Path, metavar="DIR", help="an earlier checkout to measure first")
    args = parse_with_outputs(
        parser, argv, "stream_starvation", "10 subscribers, 2 s, nothing written"
    )
    if args.smoke:
        args.subscribers, args.seconds, args.settle = 10, 2.0, 2.0
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    result: dict[str, Any] = {
        **run_header(args.argv),
        "config": {k: getattr(args, k) for k in ("subscribers", "seconds", "gap", "settle")},
        "runs": {},
    }
    with tempfile.TemporaryDirectory(prefix="gpufleet-starve-") as workdir:
        for label, tree, config in runs_of(args.baseline):
            print(f"{label}: {args.subscribers} subscribers ({tree.path})", flush=True)
            result["runs"][label] = measure(tree, label, config, Path(workdir), args)
    text = markdown(result)
    print(text)
    write_outputs("stream_starvation", result, args.out, args.md, text)
    return 0 if result["runs"]["after"]["ok_pct"] == 100 else 1


if __name__ == "__main__":
    sys.exit(main())
