"""A node that stops answering is shown not connected within seconds (issue #11, item 6).

The daemon is a real process, stopped with SIGSTOP: its kernel still accepts
and acknowledges TCP, but nothing answers, as with a hung host or a link cut
without a reset. The console's real connection code (NodeLink and its channel
options, no Qt) must notice from its keepalive pings, not from the next
inventory poll half a minute later.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from console.connections.node_link import NodeLink
from console.connections.security import LinkSecurity, open_channel
from console.fleet.updates import LinkState, LinkUpdate, Update
from tests.daemon_process import DaemonProcess

# The goal: a silent node is shown not connected within 5 s (keepalive 2 s, 1.5 s to answer).
NOTICE_WITHIN_S = 5.0
# Long enough for three of the console's pings on a link that carries no data: the
# daemon answers GOAWAY (too_many_pings) after its second strike.
IDLE_S = 7.0


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[DaemonProcess]:
    node = DaemonProcess(tmp_path, "--backend", "simulated", "--gpus", "2", "--interval", "0.2")
    node.start()
    yield node
    if node.proc is not None and node.proc.poll() is None:
        os.kill(node.proc.pid, signal.SIGCONT)  # a stopped process ignores SIGTERM
    node.stop()


class LinkWatcher:
    """Runs a NodeLink on this thread's event loop and keeps what it reports."""

    def __init__(self, target: str) -> None:
        self.updates: asyncio.Queue[Update] = asyncio.Queue()
        self.link = NodeLink(target, self.updates.put_nowait, backfill_s=0)
        self.task = asyncio.ensure_future(self.link.run())

    async def next_state(self, timeout_s: float) -> LinkUpdate:
        """The next connection-state change, skipping samples and other updates."""
        async with asyncio.timeout(timeout_s):
            while True:
                update = await self.updates.get()
                if isinstance(update, LinkUpdate):
                    return update

    async def connected_and_streaming(self) -> None:
        state = await self.next_state(30)
        while state.state != LinkState.CONNECTED:
            state = await self.next_state(30)
        async with asyncio.timeout(30):  # a sample batch after CONNECTED: streams are live
            while isinstance(await self.updates.get(), LinkUpdate):
                pass

    async def close(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


def test_a_stopped_node_is_shown_not_connected_within_5_s(daemon: DaemonProcess) -> None:
    """Before: 27-35 s (the inventory poll's deadline); keepalive alone took ~70 s."""
    assert daemon.proc is not None
    pid = daemon.proc.pid

    async def scenario() -> tuple[LinkUpdate, float, LinkUpdate]:
        watcher = LinkWatcher(daemon.address)
        try:
            await watcher.connected_and_streaming()
            os.kill(pid, signal.SIGSTOP)
            stopped_at = time.monotonic()
            lost = await watcher.next_state(NOTICE_WITHIN_S)
            noticed_s = time.monotonic() - stopped_at
            os.kill(pid, signal.SIGCONT)
            state = await watcher.next_state(30)
            while state.state != LinkState.CONNECTED:
                state = await watcher.next_state(30)
            return lost, noticed_s, state
        finally:
            await watcher.close()

    lost, noticed_s, back = asyncio.run(scenario())
    assert lost.state in (LinkState.RECONNECTING, LinkState.UNREACHABLE), lost
    assert "UNAVAILABLE" in lost.detail, lost.detail
    assert noticed_s < NOTICE_WITHIN_S
    assert back.state == LinkState.CONNECTED  # resumed once the node answers again


def test_the_daemon_permits_the_consoles_pings_on_an_idle_link(daemon: DaemonProcess) -> None:
    """Keepalive on both ends must agree: pings faster than the daemon allows get the
    link closed (GOAWAY too_many_pings) every few seconds. A health watch carries no
    data after its first answer, so every ping of the console counts."""

    async def hold_idle_stream() -> grpc.StatusCode | None:
        async with open_channel(daemon.address, LinkSecurity()) as channel:
            watch = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest())
            first = await watch.read()
            assert first.status == health_pb2.HealthCheckResponse.SERVING
            try:
                async with asyncio.timeout(IDLE_S):
                    await watch.read()  # the status does not change: nothing comes
            except TimeoutError:
                return None
            except grpc.aio.AioRpcError as exc:
                return exc.code()
            finally:
                watch.cancel()
            return grpc.StatusCode.OK  # an answer where none was due

    assert asyncio.run(hold_idle_stream()) is None
