"""A node that stops answering is loud within seconds (issues #11, item 6, and #12).

The daemon is a real process. Stopped with SIGSTOP, its kernel still accepts
and acknowledges TCP, but nothing answers, as with a hung host; behind a
forwarder turned black hole (tests/console/tcp_blackhole.py) nothing arrives
either way and nothing closes, as with a link cut without a reset; killed
with SIGKILL, its sockets reset. The console's real connection code must
notice from its keepalive pings and its data watchdog, not from the next
inventory poll half a minute later: first the link state (NodeLink, no Qt),
then the whole console (session, frame pump, notifier): the node's tiles go
stale, its own critical alert `node_not_responding` pops up with sound (to a
recording sink, and once to dunst on a private bus), and clears, withdrawing
the popup, when data flows again. How fast is measured in
bench/silent_node_notice.py, not asserted here.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from PySide6.QtCore import QItemSelectionModel
from PySide6.QtDBus import QDBusConnection
from PySide6.QtWidgets import QApplication

from console.connections.node_link import NodeLink
from console.connections.security import LinkSecurity, open_channel
from console.fleet.alert_rows import AlertRow
from console.fleet.model import FleetModel
from console.fleet.not_responding import RULE, is_local
from console.fleet.staleness import Quiet
from console.fleet.updates import LinkState, LinkUpdate, Update
from console.main_window import MainWindow
from console.notify.desktop import DesktopNotifier
from console.qt import roles
from console.qt.alert_model import ALERT_ROLE
from console.session import ConsoleSession
from gpufleet.policy import LOCAL_USER
from gpufleet.v1.alert_severity import Severity
from tests.console.desktop_bus import (
    RecordingSink,
    dunst_count,
    private_session_bus,
    recording_dunst,
    shown_by_dunst,
    skip_unless_dunst_can_run,
)
from tests.console.tcp_blackhole import BlackHoleProxy
from tests.console.xserver import xvfb
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


# -- the whole console: stale tiles, its own critical alert, popup and sound ------------

# Generous, for a loaded machine: how fast (goal 5 s) is the bench's to measure.
RAISED_WITHIN_MS = 15_000
# Keepalive has closed the link by then: a reconnect with backoff, then data.
BACK_WITHIN_MS = 30_000
HOSTNAME = "gpu-node-03"
NODE_ARGS = ("--backend", "simulated", "--gpus", "2", "--interval", "0.5", "--hostname", HOSTNAME)


@dataclass
class Watching:
    """The console (main window and all) watching one node, and what reached the person."""

    window: MainWindow
    sink: RecordingSink
    beeps: list[float]
    target: str

    @property
    def fleet(self) -> FleetModel:
        return self.window.session.fleet

    def own_alerts(self) -> list[AlertRow]:
        return [a for a in self.fleet.alerts.alerts() if a.rule == RULE and is_local(a)]

    def firing(self) -> AlertRow | None:
        return next((a for a in self.own_alerts() if a.firing), None)

    def streaming(self) -> bool:
        node = self.fleet.node(self.target)
        return node.state is LinkState.CONNECTED and node.samples_received >= 3

    def tile_quiet(self) -> Quiet | None:
        quiet: Quiet | None = self.window.session.items.gpu_index(self.target, 1).data(
            roles.QUIET_ROLE
        )
        return quiet


@pytest.fixture
def node(tmp_path: Path) -> Iterator[DaemonProcess]:
    process = DaemonProcess(tmp_path, *NODE_ARGS)
    yield process.start()
    if process.proc is not None and process.proc.poll() is None:
        os.kill(process.proc.pid, signal.SIGCONT)  # a stopped process ignores SIGTERM
    process.stop()


@pytest.fixture
def watch(qtbot, monkeypatch: pytest.MonkeyPatch, start_window) -> Callable[[str], Watching]:  # type: ignore[no-untyped-def]
    """Opens the console on a node; the sound is counted instead of played."""
    beeps: list[float] = []
    monkeypatch.setattr(QApplication, "beep", staticmethod(lambda: beeps.append(time.time())))

    def open_console(target: str) -> Watching:
        sink = RecordingSink()
        window = start_window(ConsoleSession([target]), sinks=[sink])
        watching = Watching(window, sink, beeps, target)
        qtbot.waitUntil(watching.streaming, timeout=30_000)
        assert watching.own_alerts() == []  # a live node: nothing of ours
        return watching

    return open_console


def loud_then_quiet_again(qtbot, watching: Watching, recover: Callable[[], None]) -> None:
    """After the fault: the console's own critical alert pops up with sound, the tiles go
    stale; after `recover`, data flows, the alert clears and its popup is withdrawn."""
    qtbot.waitUntil(lambda: watching.firing() is not None, timeout=RAISED_WITHIN_MS)
    alert = watching.firing()
    assert alert is not None
    assert (alert.severity, alert.gpu_index, alert.target) == (
        Severity.CRITICAL, None, watching.target,
    )  # fmt: skip
    assert alert.summary.startswith(f"{HOSTNAME} not responding: "), alert.summary
    qtbot.waitUntil(lambda: any(a.uid == alert.uid for a, _ in watching.sink.shown), timeout=5000)
    assert [n for a, n in watching.sink.shown if a.uid == alert.uid] == [HOSTNAME]
    assert watching.beeps, "a critical alert without a sound"
    assert (
        watching.window.alerts.toast.isVisible()
        and HOSTNAME in watching.window.alerts.toast.title.text()
    )
    qtbot.waitUntil(lambda: (q := watching.tile_quiet()) is not None and q.stale, timeout=10_000)
    header = watching.window.session.items.node_index(watching.target)
    assert header.data(roles.ALERT_ROLE) is Severity.CRITICAL
    # Long enough for keepalive to give the link up too: the way back is a reconnect.
    node = watching.fleet.node(watching.target)
    qtbot.waitUntil(lambda: node.state is not LinkState.CONNECTED, timeout=RAISED_WITHIN_MS)
    recover()
    qtbot.waitUntil(lambda: watching.firing() is None, timeout=BACK_WITHIN_MS)
    cleared = [a for a in watching.own_alerts() if a.uid == alert.uid]
    assert len(cleared) == 1 and not cleared[0].firing
    qtbot.waitUntil(lambda: any(a.uid == alert.uid for a in watching.sink.withdrawn), timeout=5000)
    assert watching.tile_quiet() is None
    kinds = [e.kind for e in watching.fleet.alerts.events() if e.alert and e.alert.rule == RULE]
    assert kinds == ["alert_raised", "alert_cleared"]


def test_a_stopped_daemon_is_loud_and_quiet_again_once_resumed(qtbot, node, watch) -> None:
    watching = watch(node.address)
    assert node.proc is not None
    os.kill(node.proc.pid, signal.SIGSTOP)
    loud_then_quiet_again(qtbot, watching, lambda: os.kill(node.proc.pid, signal.SIGCONT))


def test_a_black_holed_link_is_loud_and_quiet_again_once_it_forwards(qtbot, node, watch) -> None:
    proxy = BlackHoleProxy(node.address)
    try:
        watching = watch(proxy.address)
        proxy.hold()  # nothing closes, nothing arrives
        loud_then_quiet_again(qtbot, watching, proxy.resume)
    finally:
        proxy.close()


def test_a_killed_daemon_is_loud_and_quiet_again_once_restarted(qtbot, node, watch) -> None:
    watching = watch(node.address)
    node.kill()  # SIGKILL
    loud_then_quiet_again(qtbot, watching, node.start)  # same port, same state directory


# The console's own network thread blocked this long: five times the node's data deadline.
CONSOLE_STALL_S = 5.0


def test_the_consoles_own_stall_is_not_blamed_on_the_node(qtbot, node, watch) -> None:
    """A suspended laptop, a paused VM, a starved CPU: the console's network thread
    cannot run, the node's batches wait unread, and the node is not to blame. No
    alert; the stall is measured; afterwards a real silence is still caught."""
    watching = watch(node.address)
    connections = watching.window.session.connections
    loop = connections._loop  # the network thread's own loop, blocked for real
    assert loop is not None
    blocked = threading.Event()

    def block() -> None:
        blocked.set()
        time.sleep(CONSOLE_STALL_S)  # the stall itself: nothing on this thread runs

    loop.call_soon_threadsafe(block)
    qtbot.waitUntil(blocked.is_set, timeout=5000)
    record = watching.fleet.node(watching.target)
    # The GUI thread judged every frame meanwhile (the inbox was empty); once the
    # loop beats again, the stall is on record and data flows.
    qtbot.waitUntil(lambda: connections.heartbeat.stalls >= 1, timeout=CONSOLE_STALL_S * 3000)
    assert connections.heartbeat.longest_stall_s >= CONSOLE_STALL_S - 0.2
    received = record.samples_received
    qtbot.waitUntil(lambda: record.samples_received >= received + 4, timeout=10_000)
    assert watching.own_alerts() == [] and watching.sink.shown == []
    assert watching.tile_quiet() is None
    # A real silence after it is loud as ever.
    assert node.proc is not None
    os.kill(node.proc.pid, signal.SIGSTOP)
    qtbot.waitUntil(lambda: watching.firing() is not None, timeout=RAISED_WITHIN_MS)


# -- a real notification server --------------------------------------------------

DUNST_BUS = "gpufleet-silent-node-bus"


def test_dunst_shows_a_stopped_node_as_critical_and_closes_it_when_back(
    qtbot, tmp_path: Path, node: DaemonProcess
) -> None:
    skip_unless_dunst_can_run(("dbus-daemon", "dunst", "Xvfb"), "dbus dunst xvfb")
    with contextlib.ExitStack() as running:
        address = running.enter_context(private_session_bus(tmp_path))
        display = running.enter_context(xvfb(quiet=True))
        seen = running.enter_context(recording_dunst(tmp_path, address, display))
        bus = QDBusConnection.connectToBus(address, DUNST_BUS)
        running.callback(QDBusConnection.disconnectFromBus, DUNST_BUS)
        desktop = DesktopNotifier(bus)
        qtbot.waitUntil(lambda: desktop.available, timeout=5000)
        window = MainWindow(ConsoleSession([node.address]), sinks=[desktop])
        qtbot.addWidget(window)
        running.callback(window.session.stop)
        window.session.start()
        watching = Watching(window, RecordingSink(), [], node.address)
        qtbot.waitUntil(watching.streaming, timeout=30_000)
        assert node.proc is not None
        os.kill(node.proc.pid, signal.SIGSTOP)
        qtbot.waitUntil(lambda: dunst_count(bus) == 1, timeout=RAISED_WITHIN_MS)
        qtbot.waitUntil(lambda: bool(shown_by_dunst(seen)), timeout=5000)
        [shown] = shown_by_dunst(seen)
        _, urgency, summary = shown
        assert urgency == "CRITICAL", shown
        assert HOSTNAME in summary and "not responding" in summary, shown
        os.kill(node.proc.pid, signal.SIGCONT)
        qtbot.waitUntil(lambda: watching.firing() is None, timeout=BACK_WITHIN_MS)
        qtbot.waitUntil(lambda: dunst_count(bus) == 0, timeout=5000)  # withdrawn on the clear


def test_acknowledging_the_consoles_alert_stays_in_the_console(qtbot, node, watch) -> None:
    """The node never raised it, so nothing goes to the node: acknowledged here, popup gone."""
    watching = watch(node.address)
    sent: list[object] = []
    watching.window.session.pump.commandFinished.connect(sent.append)
    qtbot.waitUntil(lambda: watching.fleet.node(watching.target).identity is not None,
                    timeout=10_000)  # fmt: skip
    assert node.proc is not None
    os.kill(node.proc.pid, signal.SIGSTOP)
    qtbot.waitUntil(lambda: watching.firing() is not None, timeout=RAISED_WITHIN_MS)
    panel = watching.window.alerts.alert_panel
    qtbot.waitUntil(lambda: panel.proxy.rowCount() == 1, timeout=5000)  # refreshed at 4 Hz

    def offered() -> bool:
        """Its row selected, Acknowledge is offered. Selected through the selection model,
        not QTableView.selectRow, which reads the keyboard modifiers Qt last saw: with
        Ctrl held it toggles, and a row already selected is deselected (checked by hand).
        selectRow here failed twice in full two-worker runs, never alone; which earlier
        input left that state is not proven."""
        flags = QItemSelectionModel.SelectionFlag
        panel.table.selectionModel().select(
            panel.proxy.index(0, 0), flags.ClearAndSelect | flags.Rows
        )
        return panel.acknowledge.isEnabled()

    try:
        qtbot.waitUntil(offered, timeout=5000)
    except AssertionError:
        shown = [panel.proxy.index(r, 0).data(ALERT_ROLE) for r in range(panel.proxy.rowCount())]
        raise AssertionError(
            f"Acknowledge not offered: refusal {panel.action_refusal!r}, "
            f"selected {panel.selected_alerts()}, rows {shown}"
        ) from None
    panel.acknowledge.click()
    alert = watching.firing()
    assert alert is not None and alert.acknowledged
    # By our name on that node (its WhoAmI: "local" without authentication), as the node's
    # own records name us, not the console's login name.
    assert alert.acknowledged_by == LOCAL_USER != watching.window.session.actions.actor
    qtbot.waitUntil(lambda: any(a.uid == alert.uid for a in watching.sink.withdrawn), timeout=5000)
    os.kill(node.proc.pid, signal.SIGCONT)
    qtbot.waitUntil(lambda: watching.firing() is None, timeout=BACK_WITHIN_MS)
    assert sent == []  # no acknowledge went to the node (nor failed there)
