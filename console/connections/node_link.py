"""NodeLink: one node's connection, as a coroutine on the network thread.

Connect, read the inventory, stream samples (resuming from the last sample
seen, so a reconnect leaves no gap), and on any failure retry with backoff and
jitter. Every state change and sample becomes an update for the GUI. Calls go
through the shared client's async face (gpufleet.client.aio).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import grpc
import grpc.aio

from console.connections.channel import AUTH_BACKOFF_S, UNREACHABLE_AFTER, backoff_s
from console.connections.decode import (
    decode_alerts,
    decode_batch,
    decode_caller,
    decode_control,
    decode_event,
    decode_inventory,
    decode_reply,
    decode_workload,
)
from console.fleet.alert_rows import AlertRow
from console.fleet.updates import (
    CommandResult,
    GpuInfo,
    IdentityUpdate,
    LinkState,
    LinkUpdate,
    QueryResult,
    QueueUpdate,
    Update,
)
from gpufleet.client import calls
from gpufleet.client.aio import AsyncNodeClient
from gpufleet.client.errors import CallError
from gpufleet.client.security import LinkSecurity
from gpufleet.client.words import workload_queued
from gpufleet.v1 import node_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)

UpdateSink = Callable[[Update], None]
# An action: one unary call on the node's stub; its reply is decoded by decode_reply.
ActionCall = Callable[[pb_grpc.NodeServiceStub], Awaitable[Any]]
AlertCall = ActionCall
# Turns a query's reply into what the asker wants (on the network thread).
QueryDecoder = Callable[[str, Any], object]
# The node answered and refused us: a new token or role is needed, not a retry soon.
REFUSED = frozenset({grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED})
CLEARED_HISTORY = 200
INVENTORY_POLL_S = 30.0
# While workloads wait in a node's queue, their wait reasons (the node's placement
# says them afresh each tick, without an event) are re-read this often.
QUEUE_POLL_S = 5.0
# On first connect, ask for this much held history so plots start full.
BACKFILL_S = 600.0
# WhoAmI again this long after our credential's expiry (and then every minute
# while the node still takes it, as within its clock leeway).
CREDENTIAL_MARGIN_MS = 500
CREDENTIAL_CHECK_AFTER_MS = 60_000


class NodeLink:
    def __init__(
        self,
        target: str,
        sink: UpdateSink,
        rng: random.Random | None = None,
        backfill_s: float = BACKFILL_S,
        security: LinkSecurity | None = None,
    ) -> None:
        self.target = target
        self._security = security or LinkSecurity()
        self._sink = sink
        self._rng = rng or random.Random()
        # Resume point: the newest sample seen; before the first, the backfill window.
        self._last_sample_ms = int((time.time() - backfill_s) * 1000)
        # Resume point of the event journal (sequence numbers are per journal).
        self._journal_id: str | None = None
        self._last_event_seq = 0
        self._client: AsyncNodeClient | None = None  # while a session is connected
        self._failures = 0
        # Set when the profile's token changed: a refused link retries now, not in 30 s.
        self._wake = asyncio.Event()
        self._expires_ms: int | None = None  # our credential's expiry, as WhoAmI said
        self._queue_waits = False  # some workload of this node was queued when last seen

    async def run(self) -> None:
        """Keep the node connected until cancelled."""
        self._sink(LinkUpdate(self.target, LinkState.CONNECTING))
        while True:
            refused, detail = await self._session()
            self._failures += 1
            if refused:
                state = LinkState.DENIED
            elif self._failures >= UNREACHABLE_AFTER:
                state = LinkState.UNREACHABLE
            else:
                state = LinkState.RECONNECTING
            self._sink(LinkUpdate(self.target, state, detail))
            delay = backoff_s(self._failures, self._rng, AUTH_BACKOFF_S if refused else None)
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay)

    async def credentials_changed(self) -> None:
        """A new token: re-ask WhoAmI (its expiry), or reconnect now if waiting to retry."""
        client = self._client
        if client is None:
            self._wake.set()
            return
        try:
            await self._who_am_i(client)
        except CallError as exc:
            log.info("%s: WhoAmI with the new token: %s", self.target, exc.code.name)

    async def _session(self) -> tuple[bool, str]:
        """One connection from dial to loss; returns (refused by the node?, why it ended)."""
        try:
            async with AsyncNodeClient(self.target, self._security) as client:
                await self._serve(client)
            return False, "the daemon ended the stream"
        except CallError as exc:
            log.info("%s: %s %s", self.target, exc.code.name, exc.details)
            return exc.code in REFUSED, exc.reason
        except Exception:
            # A bug here must not end the link for good with the node shown as
            # connected and frozen: log it, show it, reconnect like any failure.
            log.exception("%s: link failed", self.target)
            return False, "internal error in the console (see its log)"

    async def _serve(self, client: AsyncNodeClient) -> None:
        inventory = await client.call(calls.GET_INVENTORY)
        update = decode_inventory(self.target, inventory)
        self._sink(update)
        listing = await client.call(calls.LIST_ALERTS, include_cleared=True, limit=CLEARED_HISTORY)
        self._sink(decode_alerts(self.target, listing))
        await self._who_am_i(client)
        await self._list_control(client)
        if listing.journal_id != self._journal_id:
            # A journal we have not seen (first connect, or the node's was reset):
            # the listing is the state; events from here on.
            self._journal_id, self._last_event_seq = listing.journal_id, listing.last_seq
        self._client = client
        self._sink(LinkUpdate(self.target, LinkState.CONNECTED))
        self._failures = 0
        try:
            await until_first_ends(
                self._stream_samples(client, len(update.info.gpus)),
                self._stream_events(client),
                self._poll_inventory(client, update.info.gpus),
                self._watch_credential(client),
                self._poll_queue(client),
            )
        finally:
            self._client = None

    async def _who_am_i(self, client: AsyncNodeClient) -> None:
        """Who the node takes us for: the views offer only what that role allows."""
        try:
            caller = await client.call(calls.WHO_AM_I)
        except CallError as exc:
            if exc.code != grpc.StatusCode.UNIMPLEMENTED:
                raise
            self._sink(IdentityUpdate(self.target, None))  # an older daemon: it decides
            return
        update = decode_caller(self.target, caller)
        self._expires_ms = update.identity.expires_unix_ms if update.identity else None
        self._sink(update)

    async def _watch_credential(self, client: AsyncNodeClient) -> None:
        """Ask WhoAmI again once our credential expires: the node's refusal then shows at
        once as denied, in its words, instead of with the next unary call (a stream opened
        before keeps flowing). A node that still takes it (clock leeway) is asked again later.
        """
        while True:
            expires = self._expires_ms
            now_ms = time.time() * 1000
            wait_ms: float = CREDENTIAL_CHECK_AFTER_MS if expires is None or expires < now_ms else 0
            if expires is not None:
                wait_ms = max(wait_ms, expires - now_ms + CREDENTIAL_MARGIN_MS)
            await asyncio.sleep(wait_ms / 1000)
            if self._expires_ms is not None and self._expires_ms <= time.time() * 1000:
                await self._who_am_i(client)  # UNAUTHENTICATED ends the session: denied

    async def _list_control(self, client: AsyncNodeClient) -> None:
        """Reservations in force and the whole workload queue; events keep them current.

        Listed after the alerts: events since the alert listing are replayed after
        this one, and the fleet model never lets a record move back in its life.
        """
        try:
            reservations = await client.call(calls.LIST_RESERVATIONS, include_ended=False)
            workloads = await client.call(calls.LIST_WORKLOADS, include_ended=True)
        except CallError as exc:
            if exc.code != grpc.StatusCode.UNIMPLEMENTED:
                raise
            log.info("%s: a daemon without reservations and workloads", self.target)
            return
        self._sink(decode_control(self.target, reservations, workloads))
        self._queue_waits = any(workload_queued(w.state) for w in workloads.workloads)

    async def _poll_queue(self, client: AsyncNodeClient) -> None:
        """Wait reasons and held GPUs of queued workloads, while there are any."""
        while True:
            await asyncio.sleep(QUEUE_POLL_S)
            if not self._queue_waits:
                continue
            reply = await client.call(calls.LIST_WORKLOADS, include_ended=False)
            rows = tuple(decode_workload(self.target, w) for w in reply.workloads)
            self._sink(QueueUpdate(self.target, rows))
            self._queue_waits = any(workload_queued(w.state) for w in reply.workloads)

    async def _stream_samples(self, client: AsyncNodeClient, gpu_count: int) -> None:
        # A stream has no deadline: it lives as long as the link. Keepalive
        # pings (CHANNEL_OPTIONS) notice a link that died silently.
        async for batch in client.stream(calls.STREAM_SAMPLES, since_unix_ms=self._last_sample_ms):
            self._last_sample_ms = batch.timestamp_unix_ms
            self._sink(decode_batch(self.target, batch, gpu_count))

    async def _poll_inventory(self, client: AsyncNodeClient, gpus: tuple[GpuInfo, ...]) -> None:
        """Re-read the inventory now and then (Slurm state, driver after an upgrade), and
        who we are: a reloaded node changes roles, teams and its kill policy live."""
        while True:
            await asyncio.sleep(INVENTORY_POLL_S)
            inventory = await client.call(calls.GET_INVENTORY)
            update = decode_inventory(self.target, inventory)
            if update.info.gpus != gpus:
                return  # other GPUs: end the session; the next one starts clean
            self._sink(update)
            await self._who_am_i(client)

    async def _stream_events(self, client: AsyncNodeClient) -> None:
        async for event in client.stream(calls.STREAM_EVENTS, after_seq=self._last_event_seq):
            self._last_event_seq = event.seq
            if event.HasField("workload") and workload_queued(event.workload.state):
                self._queue_waits = True
            self._sink(decode_event(self.target, event))

    @property
    def stub(self) -> pb_grpc.NodeServiceStub | None:
        """The connected session's stub (on the client's channel), for the action callables
        made on the network thread; None between sessions."""
        return self._client.stub if self._client is not None else None

    async def command(self, what: str, call: ActionCall, subject: str = "") -> CommandResult:
        """Run one action on the node; the result says what happened, in words.

        `subject` names what the action is about where the reply does not (the
        workload whose output is read).
        """
        stub = self.stub
        if stub is None:
            return CommandResult(self.target, what, False, f"{self.target} is not connected")
        try:
            reply = await call(stub)
        except grpc.aio.AioRpcError as exc:
            return CommandResult(self.target, what, False, f"{exc.code().name}: {exc.details()}")
        message, payload = decode_reply(self.target, reply, subject)
        alert = payload if isinstance(payload, AlertRow) else None
        return CommandResult(self.target, what, True, message, alert, None if alert else payload)

    async def query(
        self, what: str, call: ActionCall, decode: QueryDecoder, query_id: int
    ) -> QueryResult:
        """Ask the node something (audit log, usage); the reply decoded by `decode`."""
        stub = self.stub
        if stub is None:
            return QueryResult(
                self.target, what, query_id, False, f"{self.target} is not connected"
            )
        try:
            reply = await call(stub)
        except grpc.aio.AioRpcError as exc:
            message = f"{exc.code().name}: {exc.details()}"
            return QueryResult(self.target, what, query_id, False, message)
        return QueryResult(self.target, what, query_id, True, "done", decode(self.target, reply))


async def until_first_ends(*coroutines: Coroutine[Any, Any, None]) -> None:
    """Run the streams together; when one ends or fails, stop the others."""
    tasks = [asyncio.ensure_future(c) for c in coroutines]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    for task in done:
        task.result()  # re-raise the failure that ended the session
