"""The console's connection layer against real daemons: states, reconnect, no gaps."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from console.connections.manager import ConnectionManager, UpdateInbox
from console.fleet.columns import column
from console.fleet.model import FleetModel
from console.fleet.updates import LinkState, LinkUpdate, QueryResult
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1.gpu_metrics import TEMP_GPU_C
from tests.conftest import DaemonFactory, wait_for


class Console:
    """The console minus Qt: the network thread feeding a fleet model."""

    def __init__(self) -> None:
        self.inbox = UpdateInbox()
        self.fleet = FleetModel(ring_capacity=4096)
        self.manager = ConnectionManager(self.inbox)
        self.states: list[LinkState] = []

    def watch(self, target: str) -> None:
        self.fleet.add_node(target)
        self.manager.connect(target)

    def pump(self) -> bool:
        updates = self.inbox.drain()
        self.states += [u.state for u in updates if isinstance(u, LinkUpdate)]
        self.fleet.apply_all(updates)
        return True


@pytest.fixture
def console() -> Iterator[Console]:
    console = Console()
    console.manager.start()
    yield console
    console.manager.stop()


def test_receives_inventory_and_samples(console: Console, start_daemon: DaemonFactory) -> None:
    daemon = start_daemon(gpus=4, hostname="node-x")
    target = str(daemon.address)
    console.watch(target)
    node = console.fleet.node(target)
    wait_for(lambda: console.pump() and node.samples_received >= 5, what="5 samples")
    assert node.state is LinkState.CONNECTED and node.name == "node-x"
    assert node.gpu_count == 4 and len(node.latest) == 4
    times, temps = node.ring.series(2, column(TEMP_GPU_C))
    assert np.all(np.diff(times) > 0) and not np.isnan(temps[-1])


def test_unreachable_node_is_shown_unreachable(console: Console) -> None:
    console.watch("127.0.0.1:1")  # nothing listens on port 1
    node = console.fleet.node("127.0.0.1:1")
    wait_for(lambda: console.pump() and node.state is LinkState.UNREACHABLE, what="unreachable")
    assert LinkState.RECONNECTING in console.states
    assert "UNAVAILABLE" in node.state_detail


def test_daemon_restart_on_same_port_recovers_without_gap(
    console: Console, start_daemon: DaemonFactory
) -> None:
    first = start_daemon(gpus=2)
    target = str(first.address)
    console.watch(target)
    node = console.fleet.node(target)
    wait_for(lambda: console.pump() and node.samples_received >= 10, what="first samples")
    first_times, _ = first.history.since(0)
    first.stop(grace_s=0.2)
    wait_for(lambda: console.pump() and node.state is LinkState.UNREACHABLE, what="unreachable")

    second = start_daemon(gpus=2, listen=target)
    wait_for(lambda: console.pump() and node.state is LinkState.CONNECTED, 5.0, "reconnect in 5 s")
    wait_for(lambda: console.pump() and node.samples_received >= len(first_times) + 10)
    held = set(np.round(node.ring.times() * 1000).astype(np.int64).tolist())
    first_ms = {e.timestamp_unix_ms for e in first_times}
    second_ms = {e.timestamp_unix_ms for e in second.history.since(0)[0]}
    # Every sample either daemon took while the console watched is in the plot data.
    watched_second = {t for t in second_ms if t <= max(held)}
    assert first_ms <= held
    assert watched_second <= held
    # ...and the time the daemon was down is a gap (NaN), not a straight line.
    _, temps = node.ring.series(0, column(TEMP_GPU_C))
    assert np.isnan(temps).sum() == 1


def test_stop_closes_links_and_thread(start_daemon: DaemonFactory) -> None:
    daemon = start_daemon()
    console = Console()
    console.manager.start()
    console.watch(str(daemon.address))
    node = console.fleet.node(str(daemon.address))
    wait_for(lambda: console.pump() and node.samples_received >= 1)
    console.manager.stop()
    # The no_leaked_threads fixture checks that gpufleet-net is gone.


def test_every_query_is_answered_even_when_its_reply_cannot_be_decoded(
    console: Console, start_daemon: DaemonFactory
) -> None:
    """A reply the decoder fails on (or a call that fails with no RPC error) still lands
    in the inbox as a failed answer: the asker (a replay moment's node, Play waiting for
    it) would otherwise wait for ever."""
    daemon = start_daemon(gpus=2)
    target = str(daemon.address)
    console.watch(target)
    node = console.fleet.node(target)
    wait_for(lambda: console.pump() and node.state is LinkState.CONNECTED, what="connected")

    async def inventory(stub):  # type: ignore[no-untyped-def]
        return await stub.GetInventory(pb.GetInventoryRequest(), timeout=5)

    def broken_decoder(_target: str, _reply: object) -> object:
        raise ValueError("a field this console does not know")

    async def broken_call(_stub):  # type: ignore[no-untyped-def]
        raise RuntimeError("the channel closed under the call")

    console.manager.query(target, "inventory", inventory, broken_decoder, 7001).result(10)
    console.manager.query(target, "inventory", broken_call, broken_decoder, 7002).result(10)
    answers = {u.query_id: u for u in console.inbox.drain() if isinstance(u, QueryResult)}
    assert set(answers) == {7001, 7002}
    assert not answers[7001].ok and "a field this console does not know" in answers[7001].message
    assert not answers[7002].ok and "the channel closed" in answers[7002].message
