"""Benchmark: the daemon's memory (RSS) before and after N requests whose bytes do not parse.

    .venv/bin/python bench/hostile_memory.py                          # 10,000 requests
    .venv/bin/python bench/hostile_memory.py --baseline /tmp/before   # and an earlier tree
    .venv/bin/python bench/hostile_memory.py --smoke                  # 500: does it run?

For each tree (``--baseline DIR`` first, then this checkout) a fresh daemon
process (simulated backend, 2 GPUs, no tokens: what anyone who reaches the
port can do) gets ``--warmup`` hostile requests, then its RSS is read from
/proc/PID/status, then ``--requests`` more, then RSS again. A hostile request
is a few bytes that no protobuf message parses (``ff ff ff``: field
0x1fffffff, wire type 7), sent in turn to GetInventory, KillProcess,
StreamSamples and the health Check, one at a time on one channel. Reported:
RSS growth (MiB, and KiB per request), the status codes answered, the log
the daemon wrote meanwhile, and the ratio after/before.

Writes bench/results/hostile_memory.json and .md (``--out``, ``--md``;
--smoke writes nothing unless asked).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc
from machine import run_header
from results import parse_with_outputs, write_outputs
from rpc_transport_procs import Tree, TreeDaemon, measure_trees, ratio, rss_kib

GARBAGE = b"\xff\xff\xff"
METHODS = (
    ("/gpufleet.v1.NodeService/GetInventory", False),
    ("/gpufleet.v1.NodeService/KillProcess", False),
    ("/gpufleet.v1.NodeService/StreamSamples", True),
    ("/grpc.health.v1.Health/Check", False),
)


def _raw(payload: bytes) -> bytes:
    return payload


def send_hostile(channel: grpc.Channel, count: int, codes: Counter[str]) -> None:
    """`count` undecodable requests, round-robin over METHODS; their codes counted."""
    calls = [
        (channel.unary_stream if streaming else channel.unary_unary)(
            method, request_serializer=_raw, response_deserializer=_raw
        )
        for method, streaming in METHODS
    ]
    for i in range(count):
        call, streaming = calls[i % len(calls)], METHODS[i % len(calls)][1]
        try:
            reply = call(GARBAGE, timeout=10)
            if streaming:
                next(iter(reply))
            codes["OK"] += 1
        except grpc.RpcError as exc:
            codes[exc.code().name] += 1


def measure(tree: Tree, workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    codes: Counter[str] = Counter()
    with (
        TreeDaemon(tree, workdir / tree.label) as daemon,
        grpc.insecure_channel(daemon.address) as channel,
    ):
        send_hostile(channel, args.warmup, Counter())
        before_kib, log_before = rss_kib(daemon.pid), daemon.log_bytes()
        started = time.monotonic()
        send_hostile(channel, args.requests, codes)
        seconds = time.monotonic() - started
        after_kib = rss_kib(daemon.pid)
        log_after = daemon.log_bytes()
    grown = after_kib - before_kib
    return {
        "tree": str(tree.path),
        "commit": tree.commit(),
        "rss_before_mib": round(before_kib / 1024, 1),
        "rss_after_mib": round(after_kib / 1024, 1),
        "rss_growth_mib": round(grown / 1024, 1),
        "growth_kib_per_request": round(grown / args.requests, 2),
        "log_bytes": log_after - log_before,
        "requests_per_s": round(args.requests / seconds),
        "codes": dict(codes.most_common()),
    }


def markdown(result: dict[str, Any]) -> str:
    runs, config = result["runs"], result["config"]
    lines = [
        f"# Daemon memory under {config['requests']:,} undecodable requests",
        "",
        f"{result['when']}; `{' '.join(['bench/hostile_memory.py', *result['argv']])}`; "
        f"{result['machine']['nproc']} x {result['machine']['cpu_model']}, "
        f"grpcio {result['machine']['packages'].get('grpcio')}.",
        "",
        "| tree | commit | RSS before | RSS after | growth | per request | log written | answers |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for label, run in runs.items():
        answers = "; ".join(f"{code} x {n:,}" for code, n in run["codes"].items())
        lines.append(
            f"| {label} | {run['commit']} | {run['rss_before_mib']} MiB | "
            f"{run['rss_after_mib']} MiB | {run['rss_growth_mib']} MiB | "
            f"{run['growth_kib_per_request']} KiB | {run['log_bytes']:,} B | {answers} |"
        )
    if "ratio" in result:
        lines += ["", f"Growth after / before: {result['ratio']['rss_growth']}; log written "
                      f"after / before: {result['ratio']['log_bytes']}."]  # fmt: skip
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arg = parser.add_argument
    arg("--requests", type=int, default=10_000, help="hostile requests measured")
    arg("--warmup", type=int, default=500, help="hostile requests before the first reading")
    arg("--baseline", type=Path, metavar="DIR", help="an earlier checkout to measure first")
    args = parse_with_outputs(parser, argv, "hostile_memory", "500 requests, nothing written")
    if args.smoke:
        args.requests, args.warmup = 500, 50
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    result: dict[str, Any] = {
        **run_header(args.argv),
        "config": {"requests": args.requests, "warmup": args.warmup},
    }
    what = f"{args.requests:,} hostile requests"
    result["runs"] = runs = measure_trees(args, "gpufleet-hostile-", what, measure)
    if "before" in runs:
        result["ratio"] = {
            key: ratio(runs["before"][name], runs["after"][name])
            for key, name in (("rss_growth", "rss_growth_mib"), ("log_bytes", "log_bytes"))
        }
    text = markdown(result)
    print(text)
    write_outputs("hostile_memory", result, args.out, args.md, text)
    failed = any(code.startswith(("UNKNOWN", "OK")) for code in runs["after"]["codes"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
