"""K subscribers of one node daemon, in one process: the consoles of bench/daemon_streams.py.

    python bench/daemon_streams_subscribers.py --target HOST:PORT --count K \\
        --ready-file READY --stats-file STATS.json [--no-events]

Each subscriber has a channel of its own (its own TCP connection, as separate
consoles have) with the console's channel options (keepalive pings every 10 s),
reads the inventory once, then holds the streams a console holds: StreamSamples
(with a 10-minute backfill, as the console asks) and StreamEvents (from sequence
0). Every message is decoded (grpc does it), counted and time-stamped.

Once every subscriber has its first sample batch, the ready file is written.
SIGTERM or SIGINT, or stdin closing (the benchmark died), ends the run: the
arrival times of each subscriber's batches go to the stats file as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from console.connections.channel import CALL_DEADLINE_S, CHANNEL_OPTIONS
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc

BACKFILL_S = 600


@dataclass
class Subscriber:
    """What one subscriber received."""

    batch_times: list[float] = field(default_factory=list)
    batch_bytes: int = 0
    events: int = 0
    errors: list[str] = field(default_factory=list)
    first_batch: asyncio.Event = field(default_factory=asyncio.Event)

    def as_dict(self) -> dict[str, object]:
        return {
            "batch_times": self.batch_times,
            "batch_bytes": self.batch_bytes,
            "events": self.events,
            "errors": self.errors,
        }


async def stream_samples(stub: pb_grpc.NodeServiceStub, sub: Subscriber) -> None:
    since = int((time.time() - BACKFILL_S) * 1000)
    async for batch in stub.StreamSamples(pb.StreamSamplesRequest(since_unix_ms=since)):
        sub.batch_times.append(time.time())
        sub.batch_bytes += batch.ByteSize()
        sub.first_batch.set()


async def stream_events(stub: pb_grpc.NodeServiceStub, sub: Subscriber) -> None:
    async for _event in stub.StreamEvents(pb.StreamEventsRequest(after_seq=0)):
        sub.events += 1


async def subscribe(target: str, sub: Subscriber, events: bool) -> None:
    """One console's streams, until cancelled."""
    async with grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS) as channel:
        stub = pb_grpc.NodeServiceStub(channel)
        await stub.GetInventory(pb.GetInventoryRequest(), timeout=CALL_DEADLINE_S)
        streams = [stream_samples(stub, sub)] + ([stream_events(stub, sub)] if events else [])
        await asyncio.gather(*streams)


async def guarded(target: str, sub: Subscriber, events: bool) -> None:
    try:
        await subscribe(target, sub, events)
    except grpc.aio.AioRpcError as exc:
        sub.errors.append(f"{exc.code().name}: {exc.details()}")
    finally:
        sub.first_batch.set()  # a failed subscriber must not hold up "ready"


def stop_on_signals_and_eof(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)

    def watch_stdin() -> None:
        for _line in sys.stdin:
            pass
        loop.call_soon_threadsafe(stop.set)

    threading.Thread(target=watch_stdin, name="stdin-watch", daemon=True).start()


async def run(args: argparse.Namespace) -> list[Subscriber]:
    stop = asyncio.Event()
    stop_on_signals_and_eof(stop)
    subs = [Subscriber() for _ in range(args.count)]
    tasks = [asyncio.create_task(guarded(args.target, sub, args.events)) for sub in subs]
    await asyncio.wait_for(asyncio.gather(*(s.first_batch.wait() for s in subs)), 120)
    args.ready_file.write_text(f"{len(subs)}\n", encoding="utf-8")
    await stop.wait()
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError):
            await task
    return subs


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arg = parser.add_argument
    arg("--target", required=True, help="the daemon's HOST:PORT")
    arg("--count", type=int, required=True, help="subscribers (channels)")
    arg("--ready-file", type=Path, required=True, help="written once all have a batch")
    arg("--stats-file", type=Path, required=True, help="JSON written at the end")
    arg("--no-events", dest="events", action="store_false", help="sample streams only")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    subs = asyncio.run(run(args))
    stats = {"subscribers": [sub.as_dict() for sub in subs]}
    args.stats_file.write_text(json.dumps(stats), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
