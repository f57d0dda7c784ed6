"""Silences end to end: real daemons over loopback gRPC, real console windows (offscreen).

A silence made in one console reaches every node its node pattern names and is
seen by every other console (by event while running, by ListSilences when it
connects); one expired there ends everywhere. An alert raised while a silence
holds is silenced, so it does not pop up.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtWidgets import QMessageBox

from console.fleet.alert_rows import AlertRow
from console.fleet.silences import SilenceGroup
from console.fleet.updates import LinkState
from console.main_window import MainWindow
from console.session import ConsoleSession
from console.views.alerts.new_silence_dialog import NewSilenceDialog
from gpufleet.states import SilenceState
from node_daemon.backends.simulated import SimulatedBackend
from node_daemon.backends.simulated.scenario import Scenario, ScenarioEvent
from tests.conftest import DaemonFactory
from tests.console.desktop_bus import RecordingSink

Opener = Callable[..., tuple[MainWindow, RecordingSink]]


def now_ms() -> int:
    return int(time.time() * 1000)


@pytest.fixture
def open_console(qtbot, start_window) -> Opener:  # type: ignore[no-untyped-def]
    def open_(*targets: str) -> tuple[MainWindow, RecordingSink]:
        sink = RecordingSink()
        session = ConsoleSession(targets)
        window = start_window(session, sinks=[sink], size=(1400, 900))
        for target in targets:
            node = session.fleet.node(target)
            qtbot.waitUntil(lambda n=node: n.state is LinkState.CONNECTED, timeout=15_000)
        return window, sink

    return open_


def groups(window: MainWindow) -> list[SilenceGroup]:
    return window.session.fleet.silences.groups()


def create_from(window: MainWindow, node: str, rule: str, comment: str) -> None:
    """Through the window's own New-silence dialog, as a person would."""
    window.alerts.silence_panel.new.click()
    dialog = window.alerts.silence_prompts.dialog
    assert isinstance(dialog, NewSilenceDialog)
    dialog.node.setText(node)
    dialog.rule.setCurrentText(rule)
    dialog.comment.setText(comment)
    assert dialog.ok.isEnabled(), dialog.problem.text()
    dialog.ok.click()


def test_a_silence_made_in_one_console_is_seen_and_expired_in_another(
    qtbot, open_console: Opener, start_daemon: DaemonFactory
) -> None:
    one = start_daemon(gpus=2, hostname="gpu-node-01")
    two = start_daemon(gpus=2, hostname="gpu-node-02")
    other = start_daemon(gpus=2, hostname="login-1")
    targets = [str(d.address) for d in (one, two, other)]
    first, _ = open_console(*targets)
    second, _ = open_console(*targets)
    create_from(first, "gpu-node-0*", "throttle", "rack 4 fan swap")
    # The second console hears of it by event, one silence on the two nodes it names.
    named = set(targets[:2])
    qtbot.waitUntil(lambda: [set(g.targets) for g in groups(second)] == [named], timeout=15_000)
    (seen,) = groups(second)
    assert [m.text for m in seen.first.matchers] == ["node=gpu-node-0*", "alertname=throttle"]
    assert seen.first.comment == "rack 4 fan swap" and seen.state(now_ms()) is SilenceState.ACTIVE
    assert second.alerts.silence_model.rowCount() == 1
    assert sorted(second.alerts.silence_model.index(0, 1).data().split(", ")) == [
        "gpu-node-01", "gpu-node-02"]  # fmt: skip
    # A console that connects later lists it.
    third, _ = open_console(*targets)
    qtbot.waitUntil(lambda: len(groups(third)) == 1 and len(groups(third)[0].rows) == 2,
                    timeout=15_000)  # fmt: skip
    # Expired in the second console: ended on both nodes, in every console.
    second.alerts.silence_panel.table.selectRow(0)
    second.alerts.silence_panel.expire.click()
    box = second.alerts.silence_prompts.dialog
    assert isinstance(box, QMessageBox)
    box.button(QMessageBox.StandardButton.Ok).click()

    def expired_everywhere() -> bool:
        return all(
            row.state(now_ms()) is SilenceState.EXPIRED and row.expired_by
            for window in (first, third) for row in window.session.fleet.silences.silences()
        )  # fmt: skip

    qtbot.waitUntil(expired_everywhere, timeout=15_000)
    assert len(first.session.fleet.silences.silences()) == 2


def lost_alert(window: MainWindow) -> AlertRow | None:
    alerts = [a for a in window.session.fleet.alerts.alerts() if a.rule == "gpu_lost"]
    return alerts[-1] if alerts and alerts[-1].firing else None


def test_an_alert_raised_under_a_silence_is_silenced_and_does_not_pop_up(
    qtbot, open_console: Opener, start_daemon: DaemonFactory, tmp_path: Path
) -> None:
    # The node first runs clean; the silence is made; then it restarts and loses GPU 1
    # at once (a silence outlives a restart): the alert is raised under the silence.
    state = tmp_path / "state"
    clean = start_daemon(gpus=2, hostname="gpu-node-05", state_dir=state)
    target = str(clean.address)
    window, sink = open_console(target)
    create_from(window, "gpu-node-05", "gpu_lost", "GPU 1 being replaced")
    qtbot.waitUntil(lambda: len(groups(window)) == 1, timeout=15_000)
    (silence,) = window.session.fleet.silences.silences()
    clean.stop(grace_s=0.5)
    lost = Scenario((ScenarioEvent(0.2, 1, "lost"),))
    start_daemon(
        backend=SimulatedBackend(gpu_count=2, scenario=lost, step_s=0.1),
        hostname="gpu-node-05", state_dir=state, listen=target,
    )  # fmt: skip
    qtbot.waitUntil(lambda: lost_alert(window) is not None, timeout=20_000)
    alert = lost_alert(window)
    assert alert is not None
    assert alert.silence_id == silence.id and alert.silenced(now_ms())
    assert alert.silenced_by == silence.created_by  # the silence's author
    assert window.alerts.silence_model.index(0, 7).data() == "1"  # it silences one alert now
    assert [a for a, _ in sink.shown if a.rule == "gpu_lost"] == []
    assert not window.alerts.toast.isVisible() or window.alerts.toast.alert is None
