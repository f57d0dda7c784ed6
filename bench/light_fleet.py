"""Hosts many light simulated nodes in one process, for the 10,000-GPU console benchmark.

    python bench/light_fleet.py --nodes 1250 --gpus 8 --ready-file addresses.json \\
        --part 1/4     # nodes 1, 5, 9, ... of 1,250

A full simulated daemon (bench/fleet_host.py: NodeDaemon with its sampler, history,
journal and a gRPC server on a thread pool) costs about 0.15 % of a core a node at
1 Hz: 1,250 of them would take two cores from the console they feed. A light node keeps
what the console sees of a daemon and drops the rest:

- its own gRPC server on its own loopback port (grpc.aio, every node of the process on
  one event loop), serving what the console calls when it connects: GetInventory (the
  simulated backend's facts: its own hostname and GPU UUIDs), ListAlerts (none),
  WhoAmI, ListReservations, ListWorkloads (none), StreamEvents (open, quiet) and
  StreamSamples. Anything else is UNIMPLEMENTED, as from an older daemon;
- StreamSamples sends the daemon's own wire format (node_daemon.sampling.wire) at the
  sampling tick: a minute of a simulated H100 server's sweeps, serialized once at the
  start and shared by the nodes of one pattern (SHARED_PATTERNS of them; node i plays
  pattern i mod SHARED_PATTERNS from its own offset), each sent with this tick's time
  and tick number appended (protobuf merges concatenated messages, so nothing is
  re-serialized: what the daemon does for replayed batches, wire.REPLAYED_SUFFIX).

Nodes start their ticks spread over one interval, as independent servers do. Once all
serve, the bound addresses are written to the ready file as JSON. SIGTERM or SIGINT, or
the parent closing our stdin (--watch-stdin), stops the process.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
from fleet_host import parse_part, stop_when_parent_goes, write_ready_file

from console.connections.open_files import allow_open_files
from gpufleet.v1 import node_pb2 as pb
from node_daemon import __version__
from node_daemon.backends.simulated.backend import SimulatedBackend
from node_daemon.sampling.wire import batch_message, gpu_info_message

log = logging.getLogger("bench.light_fleet")

SERVICE = "gpufleet.v1.NodeService"
SHARED_PATTERNS = 16  # distinct minutes of readings; node i plays pattern i % 16
PATTERN_SWEEPS = 60  # sweeps in a pattern (a minute at the 1 s tick)
JOURNAL_ID = "light-fleet"
# Who a light node takes the console for: a viewer, as a loopback node without
# authentication would not say admin to a benchmark.
CALLER = pb.Caller(user="bench", role=pb.ROLE_VIEWER, authenticated_by="none")


class LightNode:
    """One simulated node: its inventory and its sample stream."""

    def __init__(self, index: int, gpus: int, interval_s: float,
                 patterns: Sequence[Sequence[bytes]], first_tick_at: float) -> None:  # fmt: skip
        self.index = index
        self._interval_s = interval_s
        self._sweeps = patterns[index % len(patterns)]
        self._offset = index // len(patterns)
        self._first_tick_at = first_tick_at  # monotonic: this node's tick phase
        facts = SimulatedBackend(gpu_count=gpus, seed=index).open()
        self.inventory = pb.Inventory(
            hostname=f"light-{index + 1:04d}",
            daemon_version=__version__,
            backend=pb.BACKEND_SIMULATED,
            backend_state=pb.BACKEND_STATE_OK,
            sample_interval_ms=round(interval_s * 1000),
            history_seconds=3600,
            daemon_started_unix_ms=int(time.time() * 1000),
            gpus=[gpu_info_message(g) for g in facts.gpus],
        )
        if facts.driver_version is not None:
            self.inventory.driver_version = facts.driver_version
        self.server: grpc.aio.Server | None = None
        self.address = ""

    def _tick_of(self, now: float) -> int:
        return max(0, int((now - self._first_tick_at) // self._interval_s))

    async def stream_samples(
        self, _request: pb.StreamSamplesRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[bytes]:
        loop = asyncio.get_running_loop()
        tick = self._tick_of(loop.time())
        while True:
            due = self._first_tick_at + tick * self._interval_s
            await asyncio.sleep(max(0.0, due - loop.time()))
            sweep = self._sweeps[(tick + self._offset) % len(self._sweeps)]
            stamp = pb.SampleBatch(timestamp_unix_ms=int(time.time() * 1000), tick=tick + 1)
            yield sweep + stamp.SerializeToString()
            tick = max(tick + 1, self._tick_of(loop.time()))  # a late loop skips, as a sampler

    async def stream_events(
        self, _request: pb.StreamEventsRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[pb.Event]:
        await asyncio.Event().wait()  # a quiet node: no event, the stream stays open
        yield pb.Event()  # unreachable; makes this an async generator

    def handler(self) -> grpc.GenericRpcHandler:
        def unary(answer: Any, request_type: Any) -> grpc.RpcMethodHandler:
            async def call(_request: Any, _context: Any) -> Any:
                return answer

            return grpc.unary_unary_rpc_method_handler(
                call, request_deserializer=request_type.FromString,
                response_serializer=type(answer).SerializeToString,
            )  # fmt: skip

        methods = {
            "GetInventory": unary(self.inventory, pb.GetInventoryRequest),
            "ListAlerts": unary(pb.ListAlertsResponse(journal_id=JOURNAL_ID), pb.ListAlertsRequest),
            "WhoAmI": unary(CALLER, pb.WhoAmIRequest),
            "ListReservations": unary(pb.ListReservationsResponse(), pb.ListReservationsRequest),
            "ListWorkloads": unary(pb.ListWorkloadsResponse(), pb.ListWorkloadsRequest),
            "StreamSamples": grpc.unary_stream_rpc_method_handler(
                self.stream_samples, request_deserializer=pb.StreamSamplesRequest.FromString,
                response_serializer=None,  # bytes, serialized once (see the module's note)
            ),
            "StreamEvents": grpc.unary_stream_rpc_method_handler(
                self.stream_events, request_deserializer=pb.StreamEventsRequest.FromString,
                response_serializer=pb.Event.SerializeToString,
            ),
        }  # fmt: skip
        return grpc.method_handlers_generic_handler(SERVICE, methods)

    async def start(self) -> None:
        server = grpc.aio.server()
        server.add_generic_rpc_handlers((self.handler(),))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        self.server, self.address = server, f"127.0.0.1:{port}"


def patterns_of(gpus: int, interval_s: float) -> list[list[bytes]]:
    """SHARED_PATTERNS minutes of simulated sweeps, each serialized once, without a time."""
    patterns = []
    for seed in range(SHARED_PATTERNS):
        backend = SimulatedBackend(gpu_count=gpus, seed=10_000 + seed, step_s=interval_s)
        backend.open()
        sweeps = []
        for _ in range(PATTERN_SWEEPS):
            readings = backend.read_gpus()
            sweeps.append(batch_message(0, 0, readings, backend.read_processes())
                          .SerializeToString())  # fmt: skip
        patterns.append(sweeps)
    return patterns


async def serve(args: argparse.Namespace) -> list[LightNode]:
    number, parts = args.part
    indexes = range(number - 1, args.nodes, parts)
    allow_open_files(len(indexes))  # a listening and an accepted socket a node
    patterns = patterns_of(args.gpus, args.interval)
    start = asyncio.get_running_loop().time() + 1.0
    nodes = [
        LightNode(i, args.gpus, args.interval, patterns, start + i * args.interval / args.nodes)
        for i in indexes
    ]
    for node in nodes:
        await node.start()
    return nodes


async def run(args: argparse.Namespace) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    nodes = await serve(args)
    write_ready_file(args.ready_file, nodes)
    await stop.wait()
    log.warning("stopping %d light nodes", len(nodes))
    await asyncio.gather(*(n.server.stop(0.5) for n in nodes if n.server is not None))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arg = parser.add_argument
    arg("--nodes", type=int, default=1250, help="nodes of the whole fleet (default 1250)")
    arg("--gpus", type=int, default=8, help="GPUs per node (default 8)")
    arg("--interval", type=float, default=1.0, help="sampling tick, seconds (default 1)")
    arg("--ready-file", type=Path, required=True, help="JSON of addresses, written when ready")
    arg("--state-dir", type=Path, help="unused (fleet_host.py's option, accepted alike)")
    arg("--watch-stdin", action="store_true", help="stop on stdin EOF")
    arg("--part", type=parse_part, default=(1, 1), metavar="P/K",
        help="host every K-th node from the P-th (default 1/1: all)")  # fmt: skip
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    if args.watch_stdin:
        stop_when_parent_goes()
    asyncio.run(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
