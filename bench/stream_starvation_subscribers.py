"""K console-like subscribers of one daemon, in one process: the load of stream_starvation.py.

    python bench/stream_starvation_subscribers.py --target HOST:PORT --count K \\
        --ready-file READY --stats-file STATS.json [--settle S]

Each subscriber has a channel of its own with the console's channel options
and does what a console's link does: read the inventory, then hold a sample
stream and an event stream; when either fails (refused, say), end both, wait
the console's reconnect backoff (0.25 s doubling to 2 s, with jitter) and try
again. So refused subscribers keep knocking, as real consoles do.

After `--settle` seconds the ready file is written. SIGTERM, SIGINT or stdin
closing ends the run: what each subscriber holds at that moment, the most
streams held at once, and the refusals (code and message, counted) go to the
stats file as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
import grpc.aio
from daemon_streams_subscribers import stop_on_signals_and_eof

from console.connections.channel import CALL_DEADLINE_S, CHANNEL_OPTIONS, backoff_s
from console.connections.node_link import until_first_ends
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc


@dataclass
class Tally:
    """Streams held now and at most, by all subscribers; refusals by code and message."""

    held: int = 0
    most_held: int = 0
    sessions: int = 0

    def __post_init__(self) -> None:
        self.refusals: Counter[str] = Counter()

    def opened(self) -> None:
        self.held += 1
        self.most_held = max(self.most_held, self.held)


async def hold(stream: grpc.aio.UnaryStreamCall, tally: Tally) -> None:
    """Hold one stream: counted as held from its first message to its end."""
    first = True
    try:
        async for _message in stream:
            if first:
                tally.opened()
                first = False
    finally:
        if not first:
            tally.held -= 1


async def session(stub: pb_grpc.NodeServiceStub, tally: Tally) -> None:
    await stub.GetInventory(pb.GetInventoryRequest(), timeout=CALL_DEADLINE_S)
    tally.sessions += 1
    await until_first_ends(
        hold(stub.StreamSamples(pb.StreamSamplesRequest()), tally),
        hold(stub.StreamEvents(pb.StreamEventsRequest(after_seq=0)), tally),
    )


async def subscriber(target: str, tally: Tally, rng: random.Random) -> None:
    """One console's link, until cancelled."""
    failures = 0
    async with grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS) as channel:
        stub = pb_grpc.NodeServiceStub(channel)
        while True:
            try:
                await session(stub, tally)
            except grpc.aio.AioRpcError as exc:
                tally.refusals[f"{exc.code().name}: {exc.details()}"] += 1
            failures += 1
            await asyncio.sleep(backoff_s(failures, rng))


async def run(args: argparse.Namespace) -> dict[str, object]:
    stop = asyncio.Event()
    stop_on_signals_and_eof(stop)
    tally, rng = Tally(), random.Random(1)
    tasks = [asyncio.create_task(subscriber(args.target, tally, rng)) for _ in range(args.count)]
    await asyncio.sleep(args.settle)  # let them connect and the refused ones retry
    args.ready_file.write_text(f"{tally.held}\n", encoding="utf-8")
    await stop.wait()
    held = tally.held
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError):
            await task
    return {
        "subscribers": args.count,
        "streams_held_at_end": held,
        "most_streams_held": tally.most_held,
        "sessions": tally.sessions,
        "refusals": dict(tally.refusals.most_common()),
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arg = parser.add_argument
    arg("--target", required=True, help="the daemon's HOST:PORT")
    arg("--count", type=int, required=True, help="subscribers (channels)")
    arg("--ready-file", type=Path, required=True)
    arg("--stats-file", type=Path, required=True)
    arg("--settle", type=float, default=5.0, help="seconds before the ready file")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    stats = asyncio.run(run(args))
    args.stats_file.write_text(json.dumps(stats), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
