"""Alerts end to end: a daemon process plays a scenario, the console (offscreen) reacts."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QItemSelectionModel, Qt

from console.fleet.alert_rows import AlertRow
from console.fleet.updates import LinkState
from console.main_window import MainWindow
from console.qt import roles
from console.session import ConsoleSession
from gpufleet.v1.alert_severity import Severity
from tests.conftest import wait_for
from tests.console.desktop_bus import RecordingSink
from tests.console.test_connections import Console
from tests.daemon_process import DaemonProcess

FAST = ("--backend", "simulated", "--gpus", "4", "--model", "h100", "--interval", "0.1",
        "--sim-speed", "10")  # fmt: skip
OVERHEAT = """
[[event]]
at = 1
gpu = 2
kind = "overheat"
[[event]]
at = 50
gpu = 2
kind = "cool"
"""


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[DaemonProcess]:
    scenario = tmp_path / "overheat.toml"
    scenario.write_text(OVERHEAT)
    process = DaemonProcess(tmp_path, *FAST, "--scenario", str(scenario), "--hostname", "node-hot")
    yield process.start()
    process.stop()


@pytest.fixture
def window(qtbot, daemon: DaemonProcess) -> Iterator[tuple[MainWindow, RecordingSink]]:
    sink = RecordingSink()
    session = ConsoleSession([daemon.address])
    main = MainWindow(session, sinks=[sink])
    qtbot.addWidget(main)
    main.resize(1400, 900)
    session.start()
    main.show()
    yield main, sink
    session.stop()


def gpu_temp_alert(main: MainWindow) -> AlertRow | None:
    alerts = [a for a in main.session.fleet.alerts.alerts() if a.rule == "gpu_temp"]
    return alerts[-1] if alerts else None


def test_overheat_reaches_the_on_call_engineer_and_clears(qtbot, window, daemon) -> None:
    main, sink = window
    qtbot.waitUntil(
        lambda: any(
            a.severity is Severity.CRITICAL and a.rule == "gpu_temp" for a, _ in sink.shown
        ),
        timeout=20_000,
    )
    alert, node = next(
        (a, n) for a, n in sink.shown if a.rule == "gpu_temp" and a.severity is Severity.CRITICAL
    )
    assert node == "node-hot" and alert.gpu_index == 2
    assert (
        main.alerts.toast.isVisible()
        and main.alerts.toast.title.text() == "CRITICAL · node-hot GPU 2"
    )
    tile = main.session.items.gpu_index(daemon.address, 2)
    assert tile.data(roles.ALERT_ROLE) is Severity.CRITICAL
    qtbot.waitUntil(lambda: "critical" in main.grid_part.summary.text(), timeout=2000)  # 2 Hz
    # One click on the toast opens that GPU.
    qtbot.mouseClick(main.alerts.toast, Qt.MouseButton.LeftButton)
    assert main.grid.selected == (daemon.address, 2)
    assert main.detail.key is not None and main.detail.key.index == 2
    assert not main.alerts.toast.isVisible()
    # Cooling is restored at sim-second 50: the alert clears, and the console shows it.
    qtbot.waitUntil(lambda: not gpu_temp_alert(main).firing, timeout=30_000)
    kinds = [
        main.alerts.event_model.event_row(r).kind for r in range(main.alerts.event_model.rowCount())
    ]
    assert "alert_cleared" in kinds and "alert_raised" in kinds
    assert any(a.rule == "gpu_temp" for a in sink.withdrawn)
    qtbot.waitUntil(lambda: tile.data(roles.ALERT_ROLE) is not Severity.CRITICAL, timeout=5000)


def test_acknowledge_from_the_panel_reaches_the_daemon(qtbot, window, daemon) -> None:
    main, _ = window
    qtbot.waitUntil(lambda: gpu_temp_alert(main) is not None, timeout=20_000)
    panel = main.alerts.alert_panel

    def gpu_temp_rows() -> list[int]:
        proxy = panel.proxy
        return [r for r in range(proxy.rowCount()) if proxy.index(r, 3).data() == "gpu_temp"]

    qtbot.waitUntil(lambda: bool(gpu_temp_rows()), timeout=2000)  # the table refreshes at 4 Hz
    row = gpu_temp_rows()[0]
    panel.table.selectionModel().select(
        panel.proxy.index(row, 0),
        QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows,
    )
    assert panel.acknowledge.isEnabled()
    with qtbot.waitSignal(main.session.pump.commandFinished, timeout=10_000) as result:
        panel.acknowledge.click()
    assert result.args[0].ok, result.args[0].message
    qtbot.waitUntil(lambda: gpu_temp_alert(main).acknowledged, timeout=10_000)
    assert gpu_temp_alert(main).acknowledged_by  # the console's user name
    assert "done" in main.statusBar().currentMessage()


STORM_EVENTS = 400


def storm_scenario(path: Path) -> Path:
    """GPUs falling off the bus and coming back, many times a second."""
    lines = []
    for i in range(STORM_EVENTS // 2):
        at, gpu = 0.5 + i * 0.5, i % 4
        lines += [f'[[event]]\nat = {at}\ngpu = {gpu}\nkind = "lost"\n',
                  f'[[event]]\nat = {at + 0.25}\ngpu = {gpu}\nkind = "recover"\n']  # fmt: skip
    path.write_text("\n".join(lines))
    return path


@pytest.mark.slow
def test_sigkill_mid_storm_every_event_exactly_once(tmp_path: Path) -> None:
    scenario = storm_scenario(tmp_path / "storm.toml")
    daemon = DaemonProcess(tmp_path, *FAST, "--scenario", str(scenario)).start()
    console = Console()
    console.manager.start()
    try:
        console.watch(daemon.address)
        node = console.fleet.node(daemon.address)
        wait_for(lambda: console.pump() and len(console.fleet.alerts.events()) >= 60, 30, "a storm")
        daemon.kill()  # SIGKILL: no goodbye, mid-storm
        wait_for(lambda: console.pump() and node.state is not LinkState.CONNECTED, 10)
        daemon.start()  # same port, same state directory
        wait_for(lambda: console.pump() and node.state is LinkState.CONNECTED, 10, "reconnect")
        before = len(console.fleet.alerts.events())
        wait_for(lambda: console.pump() and len(console.fleet.alerts.events()) >= before + 60, 30)
    finally:
        console.manager.stop()
        daemon.stop()
    seen = [e.seq for e in console.fleet.alerts.events()]
    journal = sqlite3.connect(tmp_path / "state" / "journal.sqlite3")
    stored = [s for (s,) in journal.execute("SELECT seq FROM events ORDER BY seq")]
    assert len(seen) == len(set(seen)), "an event was shown twice"
    assert seen == sorted(seen)
    first = seen[0]
    # Everything the daemon journaled from the console's start to its last event, exactly once.
    assert seen == [s for s in stored if first <= s <= seen[-1]]
    assert any(k == "daemon_started" for k in (e.kind for e in console.fleet.alerts.events()))
