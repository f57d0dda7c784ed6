"""Silences and live alert values in real Qt widgets (offscreen), without a daemon.

Time is a fake clock the test moves; requests go through a real ConnectionManager
that watches no node, so each lands in the inbox as "not a watched node",
naming where it would have gone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import numpy as np
import pytest
from PySide6.QtCore import QItemSelectionModel, Qt
from PySide6.QtWidgets import QApplication, QMessageBox, QWidget

from console.connections.actions import SilenceActions
from console.connections.manager import ConnectionManager, UpdateInbox
from console.fleet.alert_rows import AlertRow
from console.fleet.columns import COLUMN_COUNT, column
from console.fleet.identity import Identity
from console.fleet.model import Change, FleetModel
from console.fleet.silence_draft import SilenceDraft
from console.fleet.silences import MINUTE_MS, SilenceListing, SilenceMatcher, SilenceRow
from console.fleet.updates import (
    AlertsUpdate,
    CommandResult,
    IdentityUpdate,
    NodeInfo,
    QueryResult,
    SamplesUpdate,
)
from console.main_window import MainWindow
from console.qt.access_watcher import AccessWatcher
from console.qt.alert_model import NOW, PEAK, AlertTableModel, state_text
from console.qt.silence_model import (
    ENDING_SOON_COLOR,
    ENDING_SOON_TEXT,
    SilenceReminder,
    SilenceTableModel,
)
from console.session import ConsoleSession
from console.views.alerts.alert_panel import AlertPanel
from console.views.alerts.new_silence_dialog import NewSilenceDialog
from console.views.alerts.silence_dialog import SilenceDialog
from console.views.alerts.silence_panel import SilencePanel
from console.views.alerts.silence_prompts import SilencePrompts
from console.views.alerts.toast import Toast
from gpufleet.policy import Role
from gpufleet.v1.alert_severity import Severity
from gpufleet.v1.gpu_metrics import TEMP_GPU_C
from tests.console.hand_fed import gpus_of, node_up, simulated_node

A, B, C = "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"
NAMES = {A: "gpu-node-01", B: "gpu-node-02", C: "login-1"}
T0 = 1_800_000_000_000


class Clock:
    def __init__(self) -> None:
        self.ms = T0

    def __call__(self) -> int:
        return self.ms


def node_info(target: str) -> NodeInfo:
    """The node at `target`: simulated, 4 H100s."""
    return simulated_node(NAMES[target], gpus_of(4, f"GPU-{target}-", memory_total_bytes=None))


def fleet_of(*targets: str) -> FleetModel:
    fleet = FleetModel(ring_capacity=16)
    for target in targets:
        fleet.add_node(target)
        for update in node_up(target, node_info(target)):
            fleet.apply(update)
    return fleet


def sample(fleet: FleetModel, target: str, time_s: float, temp: float) -> None:
    rows = np.full((4, COLUMN_COUNT), np.nan, dtype=np.float32)
    rows[2, column(TEMP_GPU_C)] = temp
    fleet.apply(SamplesUpdate(target, time_s, rows, (), replayed=False))


def alert(target: str = A, **changes: object) -> AlertRow:
    row = AlertRow(
        target, "a-1", "gpu_temp/gpu2", "gpu_temp", Severity.CRITICAL, True, 2, "GPU-c", None,
        88.0, "°C", "GPU 2 temperature 88 °C", T0, T0, None, 1, "", None, None, "", "",
        peak_value=90.0,
    )  # fmt: skip
    return dataclasses.replace(row, **changes)


def silence(target: str, id_: str, **changes: object) -> SilenceRow:
    row = SilenceRow(
        target, id_, (), T0 - MINUTE_MS, T0 + 60 * MINUTE_MS, "erin", "rack 4 swap", T0
    )
    matchers = (SilenceMatcher("node", "gpu-node-0*"), SilenceMatcher("alertname", "throttle"))
    return dataclasses.replace(row, matchers=matchers, **changes)


def listing(fleet: FleetModel, target: str, *rows: SilenceRow) -> None:
    fleet.apply(QueryResult(target, "silences", 1, True, "done", SilenceListing(target, rows)))


@pytest.fixture
def connections() -> Iterator[tuple[ConnectionManager, UpdateInbox]]:
    inbox = UpdateInbox()
    manager = ConnectionManager(inbox)
    manager.start()
    yield manager, inbox
    manager.stop()


def test_the_alert_table_shows_live_now_and_peak_with_units(qtbot) -> None:
    fleet = fleet_of(A)
    for t, temp in ((T0 / 1000 - 5, 99.0), (T0 / 1000, 92.0), (T0 / 1000 + 1, 95.0)):
        sample(fleet, A, t, temp)
    xid = alert(id="a-2", rule="xid", unit="xid", value=79.0, gpu_index=1, peak_value=79.0)
    fleet.apply(AlertsUpdate(A, (alert(), xid), "j", 0))
    model = AlertTableModel(fleet)
    panel = AlertPanel(model)
    qtbot.addWidget(panel)
    panel.show()
    headers = [model.headerData(c, Qt.Orientation.Horizontal, Qt.ItemDataRole.DisplayRole)
               for c in range(model.columnCount())]  # fmt: skip
    assert headers[NOW] == "Now" and headers[PEAK] == "Peak"
    rows = {model.alert(r).rule: r for r in range(model.rowCount())}
    cell = lambda rule, col: model.index(rows[rule], col).data()  # noqa: E731
    assert (cell("gpu_temp", NOW), cell("gpu_temp", PEAK)) == ("95 °C", "95 °C")
    assert (cell("xid", NOW), cell("xid", PEAK)) == ("Xid 79", "")
    # A new sample moves Now and Peak in the next frame, with no new alert from the daemon.
    resets: list[bool] = []
    model.modelReset.connect(lambda: resets.append(True))
    sample(fleet, A, T0 / 1000 + 2, 97.0)
    with qtbot.waitSignal(model.dataChanged, timeout=1000):
        model.on_fleet_changed({A: Change.DATA})
    assert (cell("gpu_temp", NOW), cell("gpu_temp", PEAK)) == ("97 °C", "97 °C")
    sample(fleet, A, T0 / 1000 + 3, 93.0)
    model.on_fleet_changed({A: Change.DATA})
    assert (cell("gpu_temp", NOW), cell("gpu_temp", PEAK)) == ("93 °C", "97 °C")
    assert resets == []
    tip = model.index(rows["gpu_temp"], NOW).data(Qt.ItemDataRole.ToolTipRole)
    assert "live, from the console's samples" in tip


def test_the_silences_view_counts_down_and_highlights_the_last_ten_minutes(qtbot) -> None:
    fleet, clock = fleet_of(A, B), Clock()
    listing(fleet, A, silence(A, "s-1"))
    listing(fleet, B, silence(B, "s-4", created_unix_ms=T0 + 30))
    fleet.apply(AlertsUpdate(A, (alert(rule="throttle", silence_id="s-1"),), "j", 0))
    model = SilenceTableModel(fleet, clock)
    panel = SilencePanel(model)
    qtbot.addWidget(panel)
    panel.show()
    assert model.rowCount() == 1  # one silence, sent to two nodes
    texts = [model.index(0, c).data() for c in range(model.columnCount())]
    assert texts[0] == "node=gpu-node-0* alertname=throttle"
    assert texts[1] == "gpu-node-01, gpu-node-02"
    assert texts[3].endswith("· ends in 1 h")
    assert texts[4:] == ["erin", "rack 4 swap", "active", "1"]
    assert texts[2] == model.index(0, 2).data() and "·" not in texts[2]  # begun: just the time
    assert model.index(0, 0).data(Qt.ItemDataRole.BackgroundRole) is None
    clock.ms = T0 + 48 * MINUTE_MS
    with qtbot.waitSignal(model.dataChanged, timeout=3000):  # the view's own tick
        pass
    assert model.index(0, 3).data().endswith("· ends in 12 min")
    assert model.index(0, 0).data(Qt.ItemDataRole.BackgroundRole) is None
    clock.ms = T0 + 51 * MINUTE_MS  # the last ten minutes: highlighted before it ends
    assert model.index(0, 0).data(Qt.ItemDataRole.BackgroundRole) == ENDING_SOON_COLOR
    assert model.index(0, 6).data(Qt.ItemDataRole.ForegroundRole) == ENDING_SOON_TEXT  # readable
    clock.ms = T0 + 61 * MINUTE_MS
    with qtbot.waitSignal(model.dataChanged, timeout=3000):
        pass
    assert panel.proxy.rowCount() == 0  # expired: hidden unless asked for
    panel.show_expired.setChecked(True)
    assert panel.proxy.rowCount() == 1
    assert panel.proxy.index(0, 6).data() == "expired"


def test_a_new_silence_from_an_alert_starts_in_the_comment_and_enter_sends(qtbot) -> None:
    clock = Clock()
    draft_alert = alert(rule="throttle")
    nodes = [(A, NAMES[A]), (B, NAMES[B]), (C, NAMES[C])]
    dialog = NewSilenceDialog(SilenceDraft.for_alert(draft_alert, NAMES[A]), nodes, None, clock)
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    dialog.activateWindow()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is dialog.comment, timeout=2000)
    assert (dialog.node.text(), dialog.rule.currentText(), dialog.gpu.text()) == (
        "gpu-node-01", "throttle", "2")  # fmt: skip
    assert not dialog.ok.isEnabled()
    assert "comment" in dialog.problem.text()
    qtbot.keyClick(dialog.comment, Qt.Key.Key_Return)
    assert dialog.result() == 0 and dialog.isVisible()  # not valid: Enter does nothing
    dialog.node.setText("gpu-node-0*")
    assert dialog.targets.text() == "gpu-node-01, gpu-node-02"
    dialog.gpu.setText("")
    qtbot.keyClicks(dialog.comment, "fan swap")
    assert dialog.ok.isEnabled() and not dialog.problem.isVisible()
    with qtbot.waitSignal(dialog.accepted, timeout=1000):
        qtbot.keyClick(dialog.comment, Qt.Key.Key_Return)
    sent = dialog.draft().request(clock())
    assert [m.text for m in sent.matchers] == ["node=gpu-node-0*", "alertname=throttle"]
    assert sent.ends_unix_ms == T0 + 60 * MINUTE_MS and sent.comment == "fan swap"
    assert dialog.chosen_targets() == [A, B]


def test_a_maintenance_window_in_the_dialog(qtbot) -> None:
    clock = Clock()
    dialog = NewSilenceDialog(SilenceDraft(), [(A, NAMES[A])], None, clock)
    qtbot.addWidget(dialog)
    dialog.rule.setCurrentText("gpu_*")
    dialog.comment.setText("firmware")
    dialog.start_at.setChecked(True)
    dialog.until.setChecked(True)
    assert dialog.starts.isEnabled() and dialog.ends.isEnabled() and not dialog.duration.isEnabled()
    draft = dialog.draft()
    assert draft.starts_unix_ms > clock() and draft.duration_ms is None
    assert dialog.ok.isEnabled()
    dialog.ends.setDateTime(dialog.starts.dateTime().addSecs(-60))
    assert not dialog.ok.isEnabled() and "not after the start" in dialog.problem.text()


def test_prompts_send_to_each_matching_node_where_we_may_and_expire_after_asking(
    qtbot, connections
) -> None:
    manager, inbox = connections
    fleet, clock = fleet_of(A, B, C), Clock()
    fleet.apply(IdentityUpdate(B, Identity("erin", Role.VIEWER)))  # B: not allowed
    window = QWidget()
    qtbot.addWidget(window)
    prompts = SilencePrompts(fleet, SilenceActions(manager, "erin"), window, clock)
    prompts.ask_new(alert(rule="throttle"))
    dialog = prompts.dialog
    assert isinstance(dialog, NewSilenceDialog)
    dialog.node.setText("gpu-node-*")
    dialog.comment.setText("fan swap")
    assert dialog.targets.text() == "gpu-node-01"  # B refuses us; login-1 does not match
    dialog.accept()
    qtbot.waitUntil(lambda: len(inbox) == 1, timeout=5000)
    (asked,) = inbox.drain()
    assert isinstance(asked, CommandResult) and asked.target == A
    assert asked.what == f"silence node=gpu-node-* alertname=throttle gpu=2 on {A}"
    listing(fleet, A, silence(A, "s-1"))
    listing(fleet, C, silence(C, "s-2"))
    (group,) = fleet.silences.groups()
    prompts.ask_expire(group)
    box = prompts.dialog
    assert isinstance(box, QMessageBox)
    assert "gpu-node-01, login-1" in box.text() and "erin" in box.text()
    box.button(QMessageBox.StandardButton.Ok).click()
    qtbot.waitUntil(lambda: len(inbox) == 2, timeout=5000)
    assert sorted(r.target for r in inbox.drain()) == [A, C]


def test_viewers_see_silences_but_may_not_create_or_expire(qtbot) -> None:
    fleet = fleet_of(A)
    listing(fleet, A, silence(A, "s-1"))
    panel = SilencePanel(SilenceTableModel(fleet))
    qtbot.addWidget(panel)
    access = AccessWatcher(fleet)
    access.operatorRefusalChanged.connect(panel.set_action_refusal)
    fleet.apply(IdentityUpdate(A, Identity("vic", Role.VIEWER)))
    access.on_fleet_changed({A: Change.DATA})
    panel.table.selectRow(0)
    assert panel.selected() is not None
    assert not panel.new.isEnabled() and not panel.expire.isEnabled()
    assert "needs the operator role (vic is viewer on gpu-node-01)" in panel.new.toolTip()
    assert panel.expire.toolTip() == panel.new.toolTip()
    fleet.apply(IdentityUpdate(A, Identity("otto", Role.OPERATOR)))
    access.on_fleet_changed({A: Change.DATA})
    assert panel.new.isEnabled() and panel.expire.isEnabled()


def test_access_is_judged_again_only_when_a_nodes_link_or_identity_changes(qtbot) -> None:
    fleet = fleet_of(A)
    access = AccessWatcher(fleet)
    said: list[int] = []
    access.changed.connect(lambda: said.append(1))
    fleet.apply(IdentityUpdate(A, Identity("otto", Role.OPERATOR)))
    access.on_fleet_changed({A: Change.DATA})
    assert said == [1]
    access.on_fleet_changed({A: Change.DATA})  # a frame of samples: nothing to judge
    assert said == [1]
    fleet.apply(IdentityUpdate(A, Identity("vic", Role.VIEWER)))
    access.on_fleet_changed({A: Change.DATA})
    assert said == [1, 1]


def test_a_silence_about_to_end_is_announced_once_in_the_window(qtbot) -> None:
    fleet, clock = fleet_of(A), Clock()
    listing(fleet, A, silence(A, "s-1"))
    parent = QWidget()
    qtbot.addWidget(parent)
    parent.resize(800, 600)
    parent.show()
    toast = Toast(parent)
    reminder = SilenceReminder(fleet, clock, parent)
    notices: list[str] = []
    reminder.reminderDue.connect(notices.append)
    reminder.reminderDue.connect(lambda text: toast.show_notice("Silence ending", text, "s"))
    reminder.check()
    assert notices == []
    clock.ms = T0 + 55 * MINUTE_MS
    qtbot.waitUntil(lambda: len(notices) == 1, timeout=3000)  # its own timer
    assert notices == ["Silence of gpu-node-0* throttle by erin ends in 5 min"]
    assert toast.isVisible() and toast.body.text() == notices[0]
    with qtbot.waitSignal(toast.noticeClicked, timeout=1000) as clicked:
        qtbot.mouseClick(toast, Qt.MouseButton.LeftButton)
    assert clicked.args == ["s"]
    reminder.check()
    assert len(notices) == 1


def test_an_alerts_silence_button_opens_the_new_dialog_prefilled(qtbot) -> None:
    session = ConsoleSession([A])
    window = MainWindow(session)
    qtbot.addWidget(window)
    fleet = session.fleet
    for update in node_up(A, node_info(A)):
        fleet.apply(update)
    fleet.apply(AlertsUpdate(A, (alert(rule="throttle"),), "j", 0))
    window.alerts.alert_model.refresh()
    window.show()
    panel = window.alerts.alert_panel
    panel.table.selectionModel().select(
        panel.proxy.index(0, 0),
        QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows,
    )
    assert panel.silence.isEnabled()
    qtbot.mouseClick(panel.silence, Qt.MouseButton.LeftButton)
    dialog = window.alerts.silence_prompts.dialog
    assert isinstance(dialog, NewSilenceDialog)
    assert (dialog.node.text(), dialog.rule.currentText(), dialog.gpu.text()) == (
        "gpu-node-01", "throttle", "2")  # fmt: skip
    assert window.alerts.alerts_tab.pages.tabText(1) == "Silences"
    dialog.reject()


def test_the_single_alert_silence_dialog_starts_in_the_reason(qtbot) -> None:
    dialog = SilenceDialog("gpu-node-03 is not responding")
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    dialog.activateWindow()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is dialog.reason, timeout=2000)


def test_a_silenced_alert_says_by_whom_for_how_long_and_why() -> None:
    silenced = alert(silenced_until_unix_ms=T0 + 42 * MINUTE_MS + 5000, silenced_by="erin",
                     silence_reason="rack 4 swap", silence_id="s-3")  # fmt: skip
    assert state_text(silenced, T0) == "firing, silenced by erin for 42 min (rack 4 swap)"
    assert state_text(silenced, T0 + 43 * MINUTE_MS) == "firing"


def test_only_the_rows_of_nodes_that_sent_samples_are_signalled(qtbot) -> None:
    fleet = fleet_of(A, B)
    for target in (A, B):
        sample(fleet, target, T0 / 1000, 92.0)
    fleet.apply(AlertsUpdate(A, (alert(A),), "j", 0))
    fleet.apply(AlertsUpdate(B, (alert(B, id="a-9"),), "j", 0))
    model = AlertTableModel(fleet)
    row_of_b = next(r for r in range(model.rowCount()) if model.alert(r).target == B)
    changed: list[tuple[int, int, int, int]] = []
    model.dataChanged.connect(
        lambda top, bottom, *_: changed.append(
            (top.row(), bottom.row(), top.column(), bottom.column())
        )
    )
    sample(fleet, B, T0 / 1000 + 1, 97.0)
    model.on_fleet_changed({B: Change.DATA})
    assert changed == [(row_of_b, row_of_b, NOW, PEAK)]
    assert model.index(row_of_b, NOW).data() == "97 °C"
    assert model.index(1 - row_of_b, NOW).data() == "92 °C"


def test_show_cleared_adds_the_history(qtbot) -> None:
    fleet = fleet_of(A)
    fleet.apply(AlertsUpdate(A, (alert(), alert(id="a-0", firing=False)), "j", 0))
    panel = AlertPanel(AlertTableModel(fleet))
    qtbot.addWidget(panel)
    assert panel.proxy.rowCount() == 1
    panel.show_cleared.setChecked(True)  # warns (and so fails) where a deprecated call is used
    assert panel.proxy.rowCount() == 2
