"""Control views without a daemon: drag sources, tiles, dialogs, the kill zone."""

from __future__ import annotations

import dataclasses

import pytest
from PySide6.QtCore import QDateTime, QPoint, QPointF, Qt
from PySide6.QtGui import QDragEnterEvent, QDragLeaveEvent, QDragMoveEvent, QDropEvent
from PySide6.QtWidgets import QDialog, QDialogButtonBox

from console.fleet.control_requests import KillTarget
from console.fleet.placement import can_kill
from console.fleet.process_row import ProcessRow
from console.qt.drop_rules import TileDropRules
from console.qt.fleet_item_model import FleetItemModel
from console.qt.mime import read_process, read_workload
from console.qt.process_model import ProcessTableModel
from console.qt.reservation_model import ReservationTableModel
from console.qt.workload_model import WorkloadFilterProxy, WorkloadTableModel
from console.views.control.reserve_dialog import ReserveDialog
from console.views.control.submit_dialog import SubmitDialog
from console.views.detail.kill_dialog import KillDialog
from console.views.detail.kill_zone import KillZone
from console.views.grid.fleet_grid import FleetGrid
from console.views.grid.tile_painter import RESERVED
from gpufleet.states import WorkloadState
from tests.console.test_control_model import NOW, A, fleet_with, report, reservation, workload

SLEEPER = ProcessRow(4242, "alice", "sleep 300", 8 << 30, NOW - 5000, None, "41000")


def grid_of(qtbot, fleet) -> FleetGrid:  # type: ignore[no-untyped-def]
    items = FleetItemModel(fleet)
    grid = FleetGrid(items, TileDropRules(fleet))
    qtbot.addWidget(grid)
    grid.resize(900, 400)
    grid.show()
    grid.items = items  # keep the model alive with the widget
    return grid


def test_queued_rows_drag_and_carry_their_names() -> None:
    fleet = fleet_with(A)
    fleet.control.apply(workload("w-1"))
    fleet.control.apply(workload("w-2", WorkloadState.RUNNING, on=(1,)))
    model = WorkloadTableModel(fleet)
    assert [model.workload(r).id for r in range(2)] == ["w-1", "w-2"]  # queued first
    assert model.flags(model.index(0, 0)) & Qt.ItemFlag.ItemIsDragEnabled
    assert not model.flags(model.index(1, 0)) & Qt.ItemFlag.ItemIsDragEnabled
    assert read_workload(model.mimeData([model.index(0, 3)])) == (A, "w-1")
    assert read_workload(model.mimeData([model.index(1, 0)])) is None


def test_show_ended_hides_and_shows_ended_workloads() -> None:
    fleet = fleet_with(A)
    fleet.control.apply(workload("w-1"))
    fleet.control.apply(workload("w-2", WorkloadState.FINISHED))
    proxy = WorkloadFilterProxy()
    proxy.setSourceModel(WorkloadTableModel(fleet))
    assert proxy.rowCount() == 2
    proxy.set_show_ended(False)  # warnings are errors: the deprecated invalidateFilter() failed
    assert proxy.rowCount() == 1
    proxy.set_show_ended(True)
    assert proxy.rowCount() == 2


def test_process_row_carries_what_a_kill_names() -> None:
    model = ProcessTableModel()
    model.set_processes((SLEEPER,), (A, "node-1", 2))
    victim = read_process(model.mimeData([model.index(0, 0)]))
    assert victim == KillTarget(A, "node-1", 2, SLEEPER)


def test_reserved_tile_shows_its_stripe_and_menu(qtbot) -> None:
    fleet = fleet_with(A)
    fleet.control.apply(reservation((1,), "team:ml"))
    grid = grid_of(qtbot, fleet)
    tile = grid.tile_rect(A, 1)
    image = grid.grab().toImage()
    ratio = image.devicePixelRatio()
    stripe = image.pixelColor(QPoint(tile.x() + 2, tile.center().y()) * ratio)
    assert stripe == RESERVED, stripe.name()
    free = grid.tile_rect(A, 2)
    assert image.pixelColor(QPoint(free.x() + 2, free.center().y()) * ratio) != RESERVED
    menu = grid.context_menu(A, 1)
    assert [a.text().split(" (")[0] for a in menu.actions()] == [
        "Release reservation of GPU 1 for team:ml"
    ]
    with qtbot.waitSignal(grid.releaseRequested) as released:
        menu.actions()[0].trigger()
    assert released.args[0].id == "r-1"
    assert grid.context_menu(A, 2).actions() == []


def test_ctrl_click_builds_a_selection_and_escape_resets_it(qtbot) -> None:
    grid = grid_of(qtbot, fleet_with(A))
    ctrl = Qt.KeyboardModifier.ControlModifier
    qtbot.mouseClick(grid, Qt.MouseButton.LeftButton, pos=grid.tile_rect(A, 0).center())
    for gpu in (2, 3):
        qtbot.mouseClick(grid, Qt.MouseButton.LeftButton, ctrl, grid.tile_rect(A, gpu).center())
    assert grid.selection == {(A, 0), (A, 2), (A, 3)} and grid.selected == (A, 3)
    qtbot.mouseClick(grid, Qt.MouseButton.LeftButton, ctrl, grid.tile_rect(A, 2).center())
    assert grid.selection == {(A, 0), (A, 3)}
    qtbot.keyClick(grid, Qt.Key.Key_Escape)
    assert grid.selection == {grid.selected}


def test_drag_leaving_the_grid_clears_its_verdict(qtbot) -> None:
    fleet = fleet_with(A)
    fleet.control.apply(workload("w-1"))
    grid = grid_of(qtbot, fleet)
    hints: list[str] = []
    grid.dropHint.connect(hints.append)
    queue = WorkloadTableModel(fleet)
    mime = queue.mimeData([queue.index(0, 0)])
    buttons, keys = Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier
    pos = grid.tile_rect(A, 0).center()
    grid.dragEnterEvent(QDragEnterEvent(pos, Qt.DropAction.CopyAction, mime, buttons, keys))
    grid.dragMoveEvent(QDragMoveEvent(pos, Qt.DropAction.CopyAction, mime, buttons, keys))
    assert grid.hover is not None and hints == ["assign w-1 (train) to GPU 0 of node-1"]
    grid.dragLeaveEvent(QDragLeaveEvent())
    assert grid.hover is None and hints[-1] == ""


def test_kill_dialog_names_the_process_and_enter_does_not_kill(qtbot) -> None:
    dialog = KillDialog(KillTarget(A, "node-1", 2, SLEEPER))
    qtbot.addWidget(dialog)
    dialog.show()
    shown = " ".join(label.text() for label in dialog.findChildren(type(dialog.question)))
    for fact in ("4242", "alice", "sleep 300", "node-1", "GPU 2", "Slurm job", "41000", "8 GiB"):
        assert fact in shown, fact
    ok = dialog.buttons.button(QDialogButtonBox.StandardButton.Ok)
    assert ok.text() == "Kill pid 4242" and not ok.isDefault()
    with qtbot.waitSignal(dialog.finished, timeout=2000), qtbot.assertNotEmitted(dialog.accepted):
        qtbot.keyClick(dialog, Qt.Key.Key_Return)  # Enter presses Cancel, the default
    assert dialog.result() == QDialog.DialogCode.Rejected and not dialog.isVisible()


def test_reserve_dialog_wants_a_reason_and_a_future_time(qtbot) -> None:
    dialog = ReserveDialog("team:ml", "GPUs 0, 3 of node-1")
    qtbot.addWidget(dialog)
    ok = dialog.buttons.button(QDialogButtonBox.StandardButton.Ok)
    assert not ok.isEnabled()
    dialog.reason.setText("training run")
    assert ok.isEnabled()
    dialog.until.setDateTime(QDateTime.currentDateTime().addSecs(-60))
    assert not ok.isEnabled()
    dialog.preset.setCurrentIndex(0)
    assert ok.isEnabled()
    assert abs(dialog.until_unix_ms - (QDateTime.currentMSecsSinceEpoch() + 3_600_000)) < 120_000


@pytest.mark.parametrize(
    ("command", "argv"),
    [("python train.py --tag 'a b'", ("python", "train.py", "--tag", "a b")), ("echo 'open", ())],
)
def test_submit_dialog_splits_the_command(qtbot, command: str, argv: tuple[str, ...]) -> None:
    dialog = SubmitDialog([(A, "node-1")], "alice", ["team:ml"])
    qtbot.addWidget(dialog)
    dialog.command.setText(command)
    dialog.gpus.setValue(2)
    dialog.memory.setValue(40)
    assert dialog.buttons.button(QDialogButtonBox.StandardButton.Ok).isEnabled() == bool(argv)
    spec = dialog.spec()
    assert spec.argv == argv and spec.owner == "alice" and dialog.target == A
    assert spec.gpu_count == 2 and spec.min_free_memory_bytes == 40 << 30


def test_kill_zone_refuses_a_process_without_start_time(qtbot) -> None:
    fleet = fleet_with(A)
    no_start = dataclasses.replace(SLEEPER, start_time_unix_ms=None)
    report(fleet, A, 2, processes=(no_start,))
    zone = KillZone(lambda victim: can_kill(victim, fleet))
    qtbot.addWidget(zone)
    model = ProcessTableModel()
    model.set_processes((no_start,), (A, "node-1", 2))
    mime = model.mimeData([model.index(0, 0)])
    buttons, keys = Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier
    pos = zone.rect().center()
    zone.dragEnterEvent(QDragEnterEvent(pos, Qt.DropAction.MoveAction, mime, buttons, keys))
    move = QDragMoveEvent(pos, Qt.DropAction.MoveAction, mime, buttons, keys)
    zone.dragMoveEvent(move)
    assert not move.isAccepted() and zone.property("verdict") == "refuse"
    assert zone.text().startswith("Cannot kill: pid 4242 has no start time")
    with qtbot.assertNotEmitted(zone.killRequested):
        zone.dropEvent(QDropEvent(QPointF(pos), Qt.DropAction.MoveAction, mime, buttons, keys))


def test_a_new_book_with_the_same_rows_does_not_reset_the_tables() -> None:
    """Replay's moments bring a new control book every frame while Play runs: the tables
    reset (and their panels refit columns) only when the rows change."""
    fleet = fleet_with(A)
    fleet.control.apply(workload("w-1"))
    fleet.control.apply(reservation((0,), "alice", "r-1"))
    workloads, reservations = WorkloadTableModel(fleet), ReservationTableModel(fleet)
    resets: list[str] = []
    workloads.modelReset.connect(lambda: resets.append("workloads"))
    reservations.modelReset.connect(lambda: resets.append("reservations"))
    version = fleet.control.version
    # The node's listing again, as a moment's book brings it: a new version, the same rows.
    fleet.control.replace_node(A, [reservation((0,), "alice", "r-1")], [workload("w-1")])
    assert fleet.control.version != version
    workloads.on_fleet_changed({})
    reservations.on_fleet_changed({})
    assert resets == []
    fleet.control.apply(workload("w-2"))
    fleet.control.apply(reservation((1,), "bob", "r-2"))
    workloads.on_fleet_changed({})
    reservations.on_fleet_changed({})
    assert resets == ["workloads", "reservations"]
    assert workloads.rowCount() == 2 and reservations.rowCount() == 2
