"""Incident replay's Play, its step by sample, and the outage and action marks (#30).

The daemon of tests/console/test_replay.py heats GPU 1 to a critical alert that clears;
the console's strip is driven by real key events offscreen. Play runs on a clock of the
test's (the player's `clock`), so 600x plays without the test waiting in real time and
whatever the machine's load: the lockstep clock moves on only while no answer is out.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from console.connections import moment_query
from console.fleet.model import FleetModel
from console.fleet.playback import Playback, criticals
from console.fleet.timeline import EventMark, cursor_step, event_marks
from console.main_window import MainWindow
from console.session import ConsoleSession
from console.views.replay.player import START_WAIT_MS
from console.views.replay.strip import PLAY_TEXT
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.backends.simulated import SimulatedBackend
from node_daemon.backends.simulated.scenario import ScenarioEvent
from node_daemon.history.settings import HistorySettings
from tests.conftest import DaemonFactory, wait_for
from tests.console.test_replay import (
    HEAT_AND_COOL,
    _cleared,
    shown_at,
    type_moment,
)
from tests.daemon_process import DaemonProcess
from tests.node_daemon.journal import events_after
from tests.node_daemon.test_state_at import critical_alert, hot_alert, now_ms, state_at

pytestmark = pytest.mark.qt_log_ignore(
    "This plugin does not support grabbing the keyboard", extend=True
)
Key = Qt.Key
SPEED = 600


@dataclass
class Played:
    target: str
    node: pb_grpc.NodeServiceStub
    backend: SimulatedBackend
    alert_id: str
    before: int  # Unix ms: sampled, GPU 1's alert not raised yet
    window: MainWindow


@pytest.fixture
def played(qtbot, start_daemon: DaemonFactory, start_window) -> Iterator[Played]:  # type: ignore[no-untyped-def]
    backend = SimulatedBackend(gpu_count=2, scenario=HEAT_AND_COOL, step_s=5.0)
    daemon = start_daemon(backend=backend, hostname="gpu-hot",
                          history=HistorySettings(flush_interval_s=0.5))  # fmt: skip
    target = str(daemon.address)
    with grpc.insecure_channel(target) as channel:
        node = pb_grpc.NodeServiceStub(channel)
        wait_for(lambda: critical_alert(node), 30, "GPU 1's critical temperature alert")
        wait_for(lambda: _cleared(node), 30, "the alert cleared as GPU 1 cooled")
        alert = hot_alert(node, include_cleared=True)
        assert alert is not None
        window: MainWindow = start_window(ConsoleSession([target]), size=(1400, 800))
        record = window.session.fleet.node(target)
        qtbot.waitUntil(lambda: len(record.live_latest) == 2, timeout=15_000)
        window.replay.strip.window_box.setCurrentText("1 h")
        yield Played(target, node, backend, alert.id, alert.started_unix_ms - 1, window)


class LockstepClock:
    """The player's pace: `tick_ms` more at each read while no answer is out, none while
    one is; so each moment asked is `tick_ms` x speed after the last, however slow."""

    def __init__(self, fleet: FleetModel, tick_ms: float, lockstep: bool = True) -> None:
        self.fleet, self.tick_ms, self.lockstep, self.ms = fleet, tick_ms, lockstep, 0.0

    def __call__(self) -> float:
        moment = self.fleet.moment
        if not self.lockstep or moment is None or moment.waiting == 0:
            self.ms += self.tick_ms
        return self.ms


def press_on_timeline(qtbot, window: MainWindow, key: Key, shift: bool = False) -> None:  # type: ignore[no-untyped-def]
    bar = window.replay.strip.bar
    bar.setFocus()
    qtbot.waitUntil(bar.hasFocus, timeout=3000)
    modifier = Qt.KeyboardModifier.ShiftModifier if shift else Qt.KeyboardModifier.NoModifier
    QTest.keyClick(bar, key, modifier)


def firing_criticals(node: pb_grpc.NodeServiceStub, at_ms: int) -> set[str]:
    answer = state_at(node, at_ms)
    return {a.id for a in answer.alerts if a.severity == pb.SEVERITY_CRITICAL}


def test_play_at_600x_pauses_at_a_new_critical_alert_and_says_so(qtbot, played: Played) -> None:  # type: ignore[no-untyped-def]
    window, fleet = played.window, played.window.session.fleet
    part, strip = window.replay, window.replay.strip
    strip.speed.setCurrentText(f"{SPEED}x")
    tick_ms = 1.0  # 600 ms of the past a step: the critical lasts seconds
    part.player.clock = LockstepClock(fleet, tick_ms)
    type_moment(qtbot, window, played.before)
    shown_at(qtbot, window, played.target, played.before)
    asks = window.session.replay.asks
    press_on_timeline(qtbot, window, Key.Key_Space)
    qtbot.waitUntil(lambda: part.player.playing, timeout=3000)
    assert strip.play.text() != PLAY_TEXT and "playing at 600x" in part.banner.text()
    qtbot.waitUntil(lambda: not part.player.playing, timeout=30_000)
    paused = window.session.replay.at_ms
    assert paused is not None and paused > played.before
    shown_at(qtbot, window, played.target, paused)
    # At the alert: firing and critical where it paused, not at the moment shown before.
    assert played.alert_id in firing_criticals(played.node, paused)
    assert played.alert_id not in firing_criticals(played.node, paused - round(tick_ms * SPEED))
    assert "paused: a new critical alert, gpu-hot GPU 1" in part.banner.text()
    assert strip.play.text() == PLAY_TEXT
    steps = (paused - played.before) // round(tick_ms * SPEED)
    assert window.session.replay.asks - asks <= steps + 1  # one ask a moment, none piled up


def test_playing_to_the_present_returns_to_live(qtbot, played: Played) -> None:  # type: ignore[no-untyped-def]
    window, fleet = played.window, played.window.session.fleet
    part = window.replay
    part.strip.speed.setCurrentText(f"{SPEED}x")
    part.player.clock = LockstepClock(fleet, 50.0, lockstep=False)  # 30 s of the past a frame
    start = now_ms() - 5000  # cleared and quiet since: nothing critical on the way
    type_moment(qtbot, window, start)
    shown_at(qtbot, window, played.target, start)
    press_on_timeline(qtbot, window, Key.Key_Space)
    qtbot.waitUntil(lambda: fleet.moment is None, timeout=10_000)
    assert not part.player.playing and not part.banner.isVisible()
    assert not part.strip.live.isEnabled() and part.strip.play.text() == PLAY_TEXT
    assert window.statusBar().currentMessage() == "Replay: played to the present; live"


def test_a_step_is_one_sample_of_the_answers_tier(qtbot, played: Played) -> None:  # type: ignore[no-untyped-def]
    window, bar = played.window, played.window.replay.strip.bar
    # Well inside the raw tier: a second after the daemon's start is older than it holds,
    # and the window (anchored as the fixture ended) ends past the clear, seconds on.
    at = played.before + 2000
    type_moment(qtbot, window, at)
    shown_at(qtbot, window, played.target, at)
    step = max(1000, state_at(played.node, at).step_ms)  # raw: 100 ms samples, so 1 s
    qtbot.waitUntil(lambda: bar.step_ms == step, timeout=3000)
    press_on_timeline(qtbot, window, Key.Key_Left)
    shown_at(qtbot, window, played.target, at - step)
    press_on_timeline(qtbot, window, Key.Key_Right)
    shown_at(qtbot, window, played.target, at)
    press_on_timeline(qtbot, window, Key.Key_Left, shift=True)
    shown_at(qtbot, window, played.target, at - 10 * step)


def test_the_timeline_marks_an_acknowledgement_and_a_gpu_lost_and_recovered(
    qtbot, played: Played
) -> None:  # type: ignore[no-untyped-def]
    window, node = played.window, played.node
    played.backend.inject(ScenarioEvent(0, 0, "lost"))

    def lost_alert() -> pb.Alert | None:
        alerts = node.ListAlerts(pb.ListAlertsRequest(), timeout=5).alerts
        return next((a for a in alerts if a.rule == "gpu_lost" and a.gpu_index == 0), None)

    wait_for(lambda: lost_alert() is not None, 15, "GPU 0 lost")
    lost = lost_alert()
    assert lost is not None
    node.AcknowledgeAlert(pb.AcknowledgeAlertRequest(alert_id=lost.id), timeout=5)
    played.backend.inject(ScenarioEvent(0, 0, "recover"))
    bar = window.replay.strip.bar  # its marks, as painted, as the events come
    qtbot.waitUntil(lambda: any(m.what == "GPU recovered" for m in bar.events), timeout=15_000)
    journal = {pb.EventKind.Name(e.kind): e.time_unix_ms for e in events_after(node)}
    marks = {m.what: m for m in bar.events}
    for kind, what in (("EVENT_KIND_GPU_LOST", "GPU lost"),
                       ("EVENT_KIND_ALERT_ACKNOWLEDGED", "acknowledged"),
                       ("EVENT_KIND_GPU_RECOVERED", "GPU recovered")):  # fmt: skip
        mark = marks[what]
        assert mark.at_ms == journal[kind], what
        assert mark.text.startswith(f"gpu-hot GPU 0: {what}"), mark.text
        assert mark.text in bar.tooltip_at(bar.x_of(mark.at_ms)), what
    assert marks["acknowledged"].group == "person" and marks["GPU lost"].group == "gpu"
    assert "● acknowledged or silenced" in bar.tooltip_at(bar.x_of(bar.start_ms))


def test_marks_and_steps_and_play_without_qt() -> None:
    """The model alone: a step by window and sample; marks kept in the window; a critical
    already firing when Play starts is no news, a new one is; the present ends a play."""
    hour = 3_600_000
    assert cursor_step(hour, 100) == 1000 and cursor_step(hour, 10_000) == 10_000
    assert cursor_step(30 * 24 * hour, 60_000) == 30 * 24 * hour // 120  # a month of minutes
    assert cursor_step(hour, None) == 30_000
    playback = Playback()
    playback.speed = 600
    playback.play(0.0, [])
    step = playback.advance(1_000_000, 10.0, 2_000_000)
    assert step.at_ms == 1_006_000 and not step.live
    assert playback.advance(step.at_ms, 2000.0, 2_000_000).live and not playback.playing
    assert criticals([]) == {} and playback.judge([]) == []
    assert event_marks([], lambda t: t, 0, 1) == [] and EventMark(1, "GPU lost", "").group == "gpu"


def test_play_starts_without_a_node_that_never_answers_and_names_it(  # type: ignore[no-untyped-def]
    qtbot, start_daemon: DaemonFactory, start_window, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """A node hung (SIGSTOP) after the console connected: its answer for Play's first
    moment does not come. Play waits START_WAIT_MS on its clock for it, then plays with
    the node that answered, and the banner names the one that did not. (The call's own
    deadline is set beyond the test: what is tested is Play's wait, not the deadline.)"""
    monkeypatch.setattr(moment_query, "MOMENT_DEADLINE_S", 300.0)
    calm = start_daemon(backend=SimulatedBackend(gpu_count=2, step_s=1.0), hostname="gpu-calm",
                        history=HistorySettings(flush_interval_s=0.5))  # fmt: skip
    (tmp_path / "hung").mkdir()
    hung = DaemonProcess(tmp_path / "hung", "--backend", "simulated", "--gpus", "2",
                         "--interval", "0.5", "--hostname", "gpu-hung").start()  # fmt: skip
    assert hung.proc is not None
    try:
        window: MainWindow = start_window(ConsoleSession([str(calm.address), hung.address]),
                                          size=(1400, 800))  # fmt: skip
        fleet, part = window.session.fleet, window.replay
        qtbot.waitUntil(lambda: all(len(n.live_latest) == 2 for n in fleet), timeout=15_000)
        start = now_ms() - 2000
        os.kill(hung.proc.pid, signal.SIGSTOP)  # connected, and answering nothing now
        clock, reads = [0.0], [0]

        def player_clock() -> float:  # Play's clock: the wait is the test's
            reads[0] += 1
            return clock[0]

        part.player.clock = player_clock
        part.strip.speed.setCurrentText("1x")
        window.session.replay.show(start)
        moment = fleet.moment
        assert moment is not None
        qtbot.waitUntil(lambda: moment.shows(str(calm.address), start), timeout=10_000)
        assert moment.late() == [hung.address]
        part.strip.play.click()
        qtbot.waitUntil(lambda: part.player.playing, timeout=3000)
        assert window.session.replay.at_ms == start  # waiting for gpu-hung: not moving on
        clock[0] += START_WAIT_MS - 1
        read = reads[0]  # each frame of the player's timer reads its clock while it waits
        qtbot.waitUntil(lambda: reads[0] >= read + 3, timeout=3000)
        assert window.session.replay.at_ms == start and "no answer" not in part.banner.text()
        clock[0] += 2
        qtbot.waitUntil(lambda: "no answer yet from gpu-hung" in part.banner.text(),
                        timeout=3000)  # fmt: skip
        clock[0] += 1000  # a second of Play at 1x
        qtbot.waitUntil(lambda: (window.session.replay.at_ms or 0) > start, timeout=3000)
        part.player.pause("")
    finally:
        os.kill(hung.proc.pid, signal.SIGCONT)
        hung.stop()
