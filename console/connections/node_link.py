"""NodeLink: one node's connection, as a coroutine on the network thread.

Connect, read the inventory, stream samples (resuming from the last sample
seen, so a reconnect leaves no gap), and on any failure retry with backoff and
jitter. Every state change and sample becomes an update for the GUI.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable

import grpc
import grpc.aio

from console.connections.channel import (
    CALL_DEADLINE_S,
    CHANNEL_OPTIONS,
    UNREACHABLE_AFTER,
    backoff_s,
)
from console.fleet.decode import decode_batch, decode_inventory
from console.fleet.updates import LinkState, LinkUpdate, Update
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)

UpdateSink = Callable[[Update], None]
# On first connect, ask for this much held history so plots start full.
BACKFILL_S = 600.0


class NodeLink:
    def __init__(
        self,
        target: str,
        sink: UpdateSink,
        rng: random.Random | None = None,
        backfill_s: float = BACKFILL_S,
    ) -> None:
        self.target = target
        self._sink = sink
        self._rng = rng or random.Random()
        # Resume point: the newest sample seen; before the first, the backfill window.
        self._last_sample_ms = int((time.time() - backfill_s) * 1000)
        self._failures = 0

    async def run(self) -> None:
        """Keep the node connected until cancelled."""
        self._sink(LinkUpdate(self.target, LinkState.CONNECTING))
        while True:
            detail = await self._session()
            self._failures += 1
            state = (
                LinkState.UNREACHABLE
                if self._failures >= UNREACHABLE_AFTER
                else LinkState.RECONNECTING
            )
            self._sink(LinkUpdate(self.target, state, detail))
            await asyncio.sleep(backoff_s(self._failures, self._rng))

    async def _session(self) -> str:
        """One connection from dial to loss; returns why it ended."""
        try:
            async with grpc.aio.insecure_channel(self.target, options=CHANNEL_OPTIONS) as channel:
                await self._serve(pb_grpc.NodeServiceStub(channel))
            return "the daemon ended the stream"
        except grpc.aio.AioRpcError as exc:
            log.info("%s: %s %s", self.target, exc.code().name, exc.details())
            return f"{exc.code().name}: {exc.details()}"

    async def _serve(self, stub: pb_grpc.NodeServiceStub) -> None:
        inventory = await stub.GetInventory(pb.GetInventoryRequest(), timeout=CALL_DEADLINE_S)
        update = decode_inventory(self.target, inventory)
        self._sink(update)
        gpu_count = len(update.info.gpus)
        request = pb.StreamSamplesRequest(since_unix_ms=self._last_sample_ms)
        # A stream has no deadline: it lives as long as the link. Keepalive
        # pings (CHANNEL_OPTIONS) notice a link that died silently.
        stream = stub.StreamSamples(request)
        self._sink(LinkUpdate(self.target, LinkState.CONNECTED))
        self._failures = 0
        async for batch in stream:
            self._last_sample_ms = batch.timestamp_unix_ms
            self._sink(decode_batch(self.target, batch, gpu_count))
