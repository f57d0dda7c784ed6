"""Incident replay's time cursor (#30): the whole console at a past moment, end to end.

A real daemon over loopback heats a GPU to a critical alert that clears once it cools,
with its history on disk. The console's strip, driven by real key events offscreen, moves
the cursor before, into and after the alert: the grid's tiles show the temperatures the
daemon recorded then (its GetStateAt and QueryHistory's raw points), the alert table the
alert only while it fired, the banner says it is the past, and every change is refused
with "showing the past"; Esc or L returns to live, and live values flow again.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from console.fleet.control_requests import KillTarget
from console.fleet.model import Change, FleetModel
from console.fleet.moment import PAST_REFUSAL, ShownMoment, unanswered
from console.fleet.placement import can_kill
from console.fleet.process_row import ProcessRow
from console.fleet.timeline import moment_text
from console.fleet.updates import LinkState
from console.main_window import MainWindow
from console.qt import roles
from console.qt.mime import holder_mime
from console.session import ConsoleSession
from console.views.detail.part import FOLLOW_MS
from console.views.plots.gpu_plots import GpuPlots
from gpufleet.policy import role_needed
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from gpufleet.v1.alert_severity import Severity
from gpufleet.v1.gpu_metrics import TEMP_GPU_C
from node_daemon.backends.simulated.scenario import Scenario, ScenarioEvent
from tests.conftest import DaemonFactory, wait_for
from tests.console.test_terminal_moment import firing_critical
from tests.node_daemon.test_state_at import (
    hot_alert,
    now_ms,
    raw_point,
    state_at,
)

pytestmark = pytest.mark.qt_log_ignore(
    "This plugin does not support grabbing the keyboard", extend=True
)

# GPU 1 loaded, its cooling failing after 8 samples of 5 s of simulated time, back after
# 60: the critical temperature alert raises, then clears as it cools.
HEAT_AND_COOL = Scenario((
    ScenarioEvent(0.2, 1, "load", 100.0), ScenarioEvent(40, 1, "overheat"),
    ScenarioEvent(300, 1, "cool"), ScenarioEvent(300, 1, "load", 0.0),
))  # fmt: skip
Key = Qt.Key


@dataclass
class Incident:
    target: str
    node: pb_grpc.NodeServiceStub
    alert_id: str
    before: int  # Unix ms: sampled, the alert not raised yet
    during: int  # the alert firing
    after: int  # cleared


def _cleared(node: pb_grpc.NodeServiceStub) -> bool:
    alert = hot_alert(node, include_cleared=True)
    return alert is not None and alert.HasField("cleared_unix_ms")


@pytest.fixture
def incident(start_daemon: DaemonFactory) -> Iterator[Incident]:
    with firing_critical(start_daemon, HEAT_AND_COOL) as (address, node, during):
        wait_for(lambda: _cleared(node), 30, "the alert cleared as GPU 1 cooled")
        alert = hot_alert(node, include_cleared=True)
        assert alert is not None
        after = alert.cleared_unix_ms + 1
        wait_for(lambda: now_ms() > after + 300, what="samples after the clear")
        yield Incident(address, node, alert.id, alert.started_unix_ms - 1, during, after)


@pytest.fixture
def window(qtbot, start_window, incident: Incident) -> MainWindow:  # type: ignore[no-untyped-def]
    window: MainWindow = start_window(ConsoleSession([incident.target]), size=(1400, 800))
    node = window.session.fleet.node(incident.target)
    qtbot.waitUntil(lambda: node.state is LinkState.CONNECTED and len(node.live_latest) == 2,
                    timeout=15_000)  # fmt: skip
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=3000)
    return window


def shown_temps(window: MainWindow, target: str) -> list[float | None]:
    items = window.session.items
    return [roles.value(items.gpu_index(target, gpu), TEMP_GPU_C) for gpu in range(2)]


def firing_ids(window: MainWindow) -> set[str]:
    model = window.alerts.alert_model
    model.refresh()
    return {model.alert(r).id for r in range(model.rowCount()) if model.alert(r).firing}


def type_moment(qtbot, window: MainWindow, at_ms: int) -> None:  # type: ignore[no-untyped-def]
    """Type the moment in the strip's field and press Enter, as a person does."""
    field = window.replay.strip.field
    field.setFocus()
    qtbot.waitUntil(field.hasFocus, timeout=3000)
    field.selectAll()
    QTest.keyClicks(field, moment_text(at_ms) + f".{at_ms % 1000:03d}")
    QTest.keyClick(field, Key.Key_Return)


def shown_at(qtbot, window: MainWindow, target: str, at_ms: int) -> None:  # type: ignore[no-untyped-def]
    """Wait until the node's answer for the moment is on the grid (a frame applied it)."""
    fleet = window.session.fleet
    node = fleet.node(target)
    qtbot.waitUntil(
        lambda: fleet.moment is not None and node.moment is not None
        and node.moment.answered and node.moment.at_ms == at_ms, timeout=10_000,
    )  # fmt: skip


def test_the_cursor_shows_the_fleet_before_during_and_after_the_alert(
    qtbot, window: MainWindow, incident: Incident
) -> None:  # type: ignore[no-untyped-def]
    target, fleet = incident.target, window.session.fleet
    banner = window.replay.banner
    assert not banner.isVisible()
    plots = window.findChild(GpuPlots, "gpuPlots")
    assert plots is not None and plots.window.live
    for name, at_ms in (("before", incident.before), ("during", incident.during),
                        ("after", incident.after)):  # fmt: skip
        type_moment(qtbot, window, at_ms)
        shown_at(qtbot, window, target, at_ms)
        answer = state_at(incident.node, at_ms)
        recorded = [g.sample.temp_gpu_c for g in answer.gpus]
        assert shown_temps(window, target) == pytest.approx(recorded), name
        for gpu in range(2):  # the raw tier's point at the moment, as QueryHistory has it
            _, temp = raw_point(incident.node, at_ms, gpu)
            assert shown_temps(window, target)[gpu] == pytest.approx(temp), (name, gpu)
        firing = incident.alert_id in firing_ids(window)
        assert firing == (name == "during"), name
        assert {a.id for a in answer.alerts} == firing_ids(window), name
        assert banner.isVisible() and banner.text().startswith(
            f"Replay: {moment_text(at_ms)} — Esc or L returns to live"
        ), banner.text()
        tile = window.session.items.gpu_index(target, 1)  # its alert disc, as then
        assert (tile.data(roles.ALERT_ROLE) is Severity.CRITICAL) == (name == "during"), name
        # The detail's plots hold the range around the moment, marked by a line in each
        # (within DetailPart.FOLLOW_MS of the move: a running cursor moves them less often).
        marked = at_ms / 1000
        qtbot.waitUntil(lambda marked=marked: all(line.isVisible() and line.value() == marked
                                                  for line in plots.moment_lines),
                        timeout=3000)  # fmt: skip
        start, end = plots.visible_range()
        assert start < at_ms / 1000 < end, (name, start, end)

    # Esc: back to live; the live feed kept running, its values flow again.
    window.grid.setFocus()
    QTest.keyClick(window.grid, Key.Key_Escape)
    qtbot.waitUntil(lambda: fleet.moment is None and not banner.isVisible(), timeout=3000)
    assert plots.window.live and not any(line.isVisible() for line in plots.moment_lines)
    node = fleet.node(target)
    seen = node.samples_received
    qtbot.waitUntil(lambda: node.samples_received > seen + 2, timeout=10_000)
    window.session.pump.stop()  # freeze a frame: the tiles read the ring's newest row
    newest = node.ring.newest() if node.ring is not None else None
    assert newest is not None and node.moment is None
    assert shown_temps(window, target) == pytest.approx(
        [node.value(g, TEMP_GPU_C) for g in range(2)]
    )
    assert incident.alert_id in {a.id for a in fleet.alerts.alerts()}  # the live book again


def test_nothing_changes_the_fleet_while_the_past_is_shown(
    qtbot, window: MainWindow, incident: Incident
) -> None:  # type: ignore[no-untyped-def]
    target, fleet = incident.target, window.session.fleet
    type_moment(qtbot, window, incident.during)
    shown_at(qtbot, window, target, incident.during)
    # A drop on a tile: refused, saying why.
    drop = window.grid_part.drop_rules.judge(holder_mime("alice"), target, 0)
    assert not drop.verdict.ok and drop.verdict.reason == PAST_REFUSAL
    # A kill: refused by the same rule the kill dialog asks; no kill zone on the GPU.
    process = ProcessRow(pid=4242, user="alice", command="train", gpu_memory_bytes=1,
                         start_time_unix_ms=1, container_id=None, slurm_job_id=None)  # fmt: skip
    verdict = can_kill(KillTarget(target, "gpu-hot", 1, process), fleet)
    assert not verdict.ok and verdict.reason == PAST_REFUSAL
    window.open_gpu(target, 1)
    qtbot.waitUntil(lambda: window.detail.kill_refusal == PAST_REFUSAL, timeout=3000)
    assert not window.detail.kill_zone.isVisible()
    # Reserve, acknowledge, silence, drain: every call that changes a node.
    for method in ("Reserve", "AcknowledgeAlert", "SilenceAlert", "DrainGpu", "KillProcess"):
        assert fleet.role_refusal(target, role_needed(method)) == PAST_REFUSAL, method
    panel = window.alerts.alert_panel
    qtbot.waitUntil(lambda: panel.action_refusal == PAST_REFUSAL, timeout=3000)
    assert not panel.acknowledge.isEnabled() and panel.acknowledge.toolTip() == PAST_REFUSAL
    # The audit log is a query: it stays open to an admin.
    assert fleet.role_refusal(target, role_needed("QueryAudit"), live=True) is None
    # L: live, and the actions are back.
    window.grid.setFocus()
    QTest.keyClick(window.grid, Key.Key_L)
    qtbot.waitUntil(lambda: fleet.moment is None, timeout=3000)
    assert fleet.role_refusal(target, role_needed("Reserve")) is None
    qtbot.waitUntil(lambda: panel.action_refusal == "", timeout=3000)
    assert window.grid_part.drop_rules.judge(holder_mime("alice"), target, 0).verdict.ok


def test_the_strip_by_keyboard_alerts_steps_and_live(
    qtbot, window: MainWindow, incident: Incident
) -> None:  # type: ignore[no-untyped-def]
    target, fleet, part = incident.target, window.session.fleet, window.replay
    bar = part.strip.bar
    QTest.keyClick(window, Key.Key_T, Qt.KeyboardModifier.ControlModifier)  # to the timeline
    qtbot.waitUntil(bar.hasFocus, timeout=3000)
    part.strip.window_box.setCurrentText("1 h")
    QTest.keyClick(bar, Key.Key_PageUp)  # the newest alert's raise
    newest = max(t for t, _ in part.marks)
    shown_at(qtbot, window, target, newest)
    raised = max(fleet.live_alerts.alerts(), key=lambda a: a.started_unix_ms)
    assert raised.id in firing_ids(window)  # at its mark, the alert it marks is firing
    condition = window.session.items.gpu_index(target, 0).data(roles.CONDITION_ROLE)
    assert condition is not None and condition.healthy  # judged, healthy then
    assert part.strip.field.text() == moment_text(newest)
    step = bar.step_ms  # a step back: one sample of the answer's tier (test_replay_play.py)
    QTest.keyClick(bar, Key.Key_Left)
    shown_at(qtbot, window, target, newest - step)
    QTest.keyClick(bar, Key.Key_PageDown)  # the next alert's raise after the cursor
    following = min(t for t, _ in part.marks if t > newest - step)
    assert following <= newest
    shown_at(qtbot, window, target, following)
    QTest.keyClick(bar, Key.Key_End)
    qtbot.waitUntil(lambda: fleet.moment is None, timeout=3000)
    assert not part.strip.live.isEnabled() and part.strip.field.text() == ""


def test_a_dragged_cursor_asks_only_the_newest_moment_while_an_answer_is_out(
    qtbot, window: MainWindow, incident: Incident
) -> None:  # type: ignore[no-untyped-def]
    source, target = window.session.replay, incident.target
    asks = source.asks
    for offset in range(0, 40_000, 1000):  # 40 positions within one event-loop turn
        source.show(incident.before - offset)
    assert source.asks == asks + 1  # one in flight; the rest coalesced into the newest
    last = incident.before - 39_000
    shown_at(qtbot, window, target, last)
    assert source.asks == asks + 2  # the first answer in, the newest asked once


def test_a_moment_s_books_answer_as_of_it() -> None:
    """Silences and reservations read as of the moment shown, whatever `now` a view passes."""
    moment = ShownMoment(1_000)
    assert moment.due(["a", "b"]) == ["a", "b"]
    moment.asked("a", 1_000, 7)
    moment.want(2_000)
    assert moment.due(["a", "b"]) == ["b"] and moment.expects(7)
    assert moment.alerts.at_ms == moment.control.at_ms == 2_000


def test_moving_the_cursor_changes_no_node_until_it_answers() -> None:
    """A drag or Play moves the cursor every frame: only an answer marks its node."""
    fleet = FleetModel()
    for target in ("a:1", "b:1"):
        fleet.add_node(target)
    assert fleet.show_moment(1_000) == {"a:1": Change.DATA, "b:1": Change.DATA}  # the past
    version = fleet.alerts.version
    assert fleet.show_moment(2_000) == {}  # the cursor moved on: nothing shown changed yet
    assert fleet.alerts.version == version + 1  # the books read as of the new moment
    assert fleet.moment is not None and fleet.moment.due(["a:1", "b:1"]) == ["a:1", "b:1"]
    assert fleet.show_live() == {"a:1": Change.DATA, "b:1": Change.DATA}


def test_under_play_s_budget_the_nodes_showing_the_oldest_moment_are_asked_first() -> None:
    moment = ShownMoment(1_000)
    for query_id, (target, at_ms) in enumerate((("a", 1_000), ("b", 1_000), ("c", 1_000)), 1):
        moment.asked(target, at_ms, query_id)
        moment.take(query_id, unanswered(target, at_ms, 1, 1, ""))
    moment.want(4_000)
    moment.asked("a", 4_000, 4)
    moment.take(4, unanswered("a", 4_000, 1, 1, ""))  # a moved on
    moment.want(5_000)
    moment.asked("d", 5_000, 5)  # in flight: never due
    assert moment.due("abcde", most=2) == ["e", "b"]  # never answered, then the oldest shown
    assert moment.due("abcde") == ["a", "b", "c", "e"]  # no budget: every free node


def test_a_running_cursor_moves_the_plots_at_most_every_follow_ms(qtbot, start_window) -> None:  # type: ignore[no-untyped-def]
    """Play moves the cursor every frame; the plots follow the last moment wanted, a
    redraw over a moved range at most every FOLLOW_MS."""
    window: MainWindow = start_window(ConsoleSession([]), size=(1400, 800))
    plots = window.findChild(GpuPlots, "gpuPlots")
    assert plots is not None
    moved: list[tuple[float, float | None]] = []
    follow = plots.show_moment

    def recorded(at_s: float | None) -> None:
        moved.append((time.monotonic(), at_s))
        follow(at_s)

    plots.show_moment = recorded  # type: ignore[method-assign]
    start = int(time.time() * 1000) - 3_600_000
    for frame in range(10):  # ten frames' moves before the event loop runs
        window.session.replay.show(start + 3000 * frame)
    qtbot.waitUntil(lambda: bool(moved), timeout=3000)
    assert [at for _, at in moved] == [(start + 27_000) / 1000]  # the last, once
    window.session.replay.show(start + 60_000)
    qtbot.waitUntil(lambda: len(moved) == 2, timeout=3000)
    assert moved[1][1] == (start + 60_000) / 1000
    assert moved[1][0] - moved[0][0] >= FOLLOW_MS / 1000 * 0.9  # a Qt timer may fire a bit early
    window.session.replay.go_live()  # live: at once
    assert moved[-1][1] is None and plots.window.live
