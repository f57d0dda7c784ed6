"""Drag-and-drop control against a real daemon: assign, reserve, refuse, kill.

Drags are replayed as real QDragEnterEvent / QDragMoveEvent / QDropEvent objects
handed to the widgets' handlers (QDrag.exec would block offscreen). The MIME data
comes from the drag sources' own models, so source and target are tested together.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import grpc
import pytest
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt
from PySide6.QtGui import QDragEnterEvent, QDragMoveEvent, QDropEvent
from PySide6.QtWidgets import QMessageBox, QWidget

from console.fleet.control import WorkloadRow
from console.fleet.updates import KillReport, LinkState
from console.main_window import MainWindow
from console.qt import roles
from console.session import ConsoleSession
from console.views.control.output_dialog import OutputDialog
from console.views.control.reserve_dialog import ReserveDialog
from console.views.control.submit_dialog import SubmitDialog
from console.views.detail.kill_dialog import KillDialog
from gpufleet.states import WorkloadState
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.control.settings import WorkloadSettings
from tests.conftest import DaemonFactory

# Workloads run as their owners' local accounts: the tests create them.
pytestmark = pytest.mark.usefixtures("workload_accounts")

SLEEPER = ("sleep", "300")


@dataclass
class Console:
    window: MainWindow
    target: str
    stub: pb_grpc.NodeServiceStub  # another admin, straight to the daemon
    sent: list[str] = field(default_factory=list)  # every request the console sent

    @property
    def fleet(self):  # type: ignore[no-untyped-def]
        return self.window.session.fleet

    def workload(self, workload_id: str) -> WorkloadRow | None:
        return self.fleet.control.workload(self.target, workload_id)


@contextmanager
def recorded_console(qtbot, start_daemon: DaemonFactory, monkeypatch) -> Iterator[Console]:  # type: ignore[no-untyped-def]
    """A MainWindow (1400x900, shown) on a real 4-GPU daemon "node-a", connected, its
    requests recorded in `sent`; the session stops and the channel closes afterwards."""
    # The console runs unauthenticated as root here: team:ml's workloads need an account.
    accounts = WorkloadSettings(accounts={"team:ml": "worker"})
    daemon = start_daemon(gpus=4, hostname="node-a", seed=1, workloads=accounts)
    target = str(daemon.address)
    session = ConsoleSession([target], people=["alice", "team:ml"])
    window = MainWindow(session)
    qtbot.addWidget(window)
    window.resize(1400, 900)
    channel = grpc.insecure_channel(target)
    result = Console(window, target, pb_grpc.NodeServiceStub(channel))
    send = session.connections.request

    def record(target: str, what: str, call: Callable, subject: str = "") -> None:  # type: ignore[type-arg]
        result.sent.append(what)
        send(target, what, call, subject)

    monkeypatch.setattr(session.connections, "request", record)
    session.start()
    window.show()
    node = session.fleet.node(target)
    qtbot.waitUntil(
        lambda: node.state is LinkState.CONNECTED and len(node.latest) == 4, timeout=15_000
    )
    try:
        yield result
    finally:
        session.stop()
        channel.close()


@pytest.fixture
def console(qtbot, start_daemon: DaemonFactory, monkeypatch) -> Iterator[Console]:
    with recorded_console(qtbot, start_daemon, monkeypatch) as opened:
        yield opened


def submit(console: Console, owner: str = "alice", argv: tuple[str, ...] = SLEEPER) -> str:
    """Queue a workload as another admin would (gpufleet submit); the console sees it arrive."""
    request = pb.SubmitWorkloadRequest(argv=list(argv), owner=owner, gpu_count=1, actor=owner)
    workload_id = console.stub.SubmitWorkload(request, timeout=5).id
    return workload_id


def _in_hours(hours: float) -> int:
    return int((time.time() + hours * 3600) * 1000)


def queued_beside_bobs_reservation(qtbot, console: Console) -> str:  # type: ignore[no-untyped-def]
    """GPU 1 reserved for bob for two hours ("paper deadline") and a workload of alice's
    queued, both as another admin would; back once the console shows both. Returns the
    workload's id."""
    reserve = pb.ReserveRequest(gpu_indices=[1], holder="bob", reason="paper deadline",
                                until_unix_ms=_in_hours(2), actor="bob")  # fmt: skip
    console.stub.Reserve(reserve, timeout=5)
    workload_id = submit(console, owner="alice")
    gpu = console.window.session.items.gpu_index(console.target, 1)
    qtbot.waitUntil(
        lambda: (
            gpu.data(roles.RESERVATION_ROLE) is not None
            and console.workload(workload_id) is not None
        ),
        timeout=5000,
    )
    return workload_id


def drag_over(widget: QWidget, mime: QMimeData, pos: QPoint) -> QDragMoveEvent:
    """A drag entering the widget and moving to `pos`; returns the move (accepted or not)."""
    buttons, keys = Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier
    enter = QDragEnterEvent(pos, Qt.DropAction.CopyAction, mime, buttons, keys)
    widget.dragEnterEvent(enter)  # type: ignore[attr-defined]
    assert enter.isAccepted(), "the widget did not take the drag at all"
    move = QDragMoveEvent(pos, Qt.DropAction.CopyAction, mime, buttons, keys)
    widget.dragMoveEvent(move)  # type: ignore[attr-defined]
    return move


def drop(widget: QWidget, mime: QMimeData, pos: QPoint) -> QDropEvent:
    event = QDropEvent(QPointF(pos), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                       Qt.KeyboardModifier.NoModifier)  # fmt: skip
    widget.dropEvent(event)  # type: ignore[attr-defined]
    return event


def workload_mime(console: Console, workload_id: str) -> QMimeData:
    """What dragging the workload's row out of the queue panel carries."""
    panel = console.window.control.workload_panel
    index = panel.row_index(console.target, workload_id)
    assert index.isValid() and panel.proxy.flags(index) & Qt.ItemFlag.ItemIsDragEnabled
    return panel.proxy.mimeData([index])


def test_queued_workload_dropped_on_a_tile_runs_there(qtbot, console: Console) -> None:
    workload_id = submit(console)
    qtbot.waitUntil(lambda: console.workload(workload_id) is not None, timeout=5000)
    grid, tile = console.window.grid, console.window.grid.tile_rect(console.target, 2)
    mime = workload_mime(console, workload_id)
    move = drag_over(grid, mime, tile.center())
    assert move.isAccepted()
    (hovered, verdict) = grid.hover
    assert hovered == (console.target, 2) and verdict.verdict.ok
    assert verdict.verdict.reason == f"assign {workload_id} (sleep) to GPU 2 of node-a"
    assert console.sent == []  # hovering sends nothing
    with qtbot.waitSignal(console.window.session.pump.commandFinished, timeout=10_000) as done:
        assert drop(grid, mime, tile.center()).isAccepted()
    assert done.args[0].ok, done.args[0].message
    assert [s for s in console.sent if s.startswith("assign")] == [
        f"assign {workload_id} (sleep) to GPU 2 of {console.target}"
    ]
    assert len(console.sent) == 1
    gpu = console.window.session.items.gpu_index(console.target, 2)

    def sleeper_on_gpu2() -> bool:
        snap = console.fleet.node(console.target).latest[2]
        return any(p.user == "alice" and p.command == "sleep 300" for p in snap.processes)

    qtbot.waitUntil(sleeper_on_gpu2, timeout=10_000)
    running = gpu.data(roles.WORKLOAD_ROLE)
    assert running.id == workload_id and running.state is WorkloadState.RUNNING
    assert running.gpu_indices == (2,)
    assert (
        "running"
        in console.window.control.workload_model.index(
            console.window.control.workload_model.row_of(console.target, workload_id), 6
        ).data()
    )


def test_drop_on_a_gpu_reserved_for_someone_else_is_refused(qtbot, console: Console) -> None:
    workload_id = queued_beside_bobs_reservation(qtbot, console)
    grid, tile = console.window.grid, console.window.grid.tile_rect(console.target, 1)
    mime = workload_mime(console, workload_id)
    move = drag_over(grid, mime, tile.center())
    assert not move.isAccepted()
    reason = grid.hover[1].verdict.reason
    assert reason.startswith("GPU 1 is reserved for bob until ") and "(paper deadline)" in reason
    assert reason in console.window.statusBar().currentMessage()
    # The hovered tile is outlined red, and the reason is painted beside it.
    image = grid.grab().toImage()
    edge = image.pixelColor(QPoint(tile.left() - 2, tile.center().y()) * image.devicePixelRatio())
    assert edge.red() > 200 and edge.green() < 140, edge.name()
    drop(grid, mime, tile.center())
    assert grid.last_drop is not None and not grid.last_drop.verdict.ok
    assert reason in console.window.statusBar().currentMessage()
    assert console.sent == []  # refused here: nothing went to the daemon
    assert console.workload(workload_id).state is WorkloadState.QUEUED


def test_person_dropped_on_selected_tiles_reserves_them(qtbot, console: Console) -> None:
    grid = console.window.grid
    for gpu, add in ((0, False), (3, True)):  # click GPU 0, Ctrl+click GPU 3
        modifier = Qt.KeyboardModifier.ControlModifier if add else Qt.KeyboardModifier.NoModifier
        qtbot.mouseClick(grid, Qt.MouseButton.LeftButton, modifier,
                         grid.tile_rect(console.target, gpu).center())  # fmt: skip
    assert grid.selection == {(console.target, 0), (console.target, 3)}
    people = console.window.control.people_panel
    mime = people.proxy.mimeData([people.person_index("team:ml")])
    tile = grid.tile_rect(console.target, 3)
    assert drag_over(grid, mime, tile.center()).isAccepted()
    assert grid.hover[1].verdict.reason == "reserve GPUs 0, 3 of node-a for team:ml"
    drop(grid, mime, tile.center())
    dialog = console.window.control.prompts.dialog
    assert isinstance(dialog, ReserveDialog) and dialog.isVisible()
    assert console.sent == []  # nothing until the dialog is accepted
    dialog.preset.setCurrentIndex(0)  # 1 hour
    dialog.reason.setText("training run")
    with qtbot.waitSignal(console.window.session.pump.commandFinished, timeout=10_000) as done:
        dialog.accept()
    assert done.args[0].ok, done.args[0].message
    assert console.sent == [f"reserve GPU 0, 3 of {console.target} for team:ml"]
    held = console.fleet.control.reservation_on(console.target, 3, _in_hours(0))
    assert held.holder == "team:ml" and held.gpu_indices == (0, 3) and held.reason == "training run"
    listed = console.stub.ListReservations(pb.ListReservationsRequest(), timeout=5).reservations
    assert [(list(r.gpu_indices), r.holder) for r in listed] == [([0, 3], "team:ml")]
    # The tile shows the lock; its context menu releases this GPU, after a question.
    gpu0 = console.window.session.items.gpu_index(console.target, 0)
    assert gpu0.data(roles.RESERVATION_ROLE).id == held.id
    menu = grid.context_menu(console.target, 0)
    # First the reservation's entry; the GPU's health entries (drain...) follow it.
    release = menu.actions()[0]
    assert release.text().startswith("Release reservation of GPU 0 (of GPUs 0, 3) for team:ml")
    release.trigger()
    box = console.window.control.release_prompts.dialog
    assert isinstance(box, QMessageBox) and "Release GPU 0 of node-a" in box.text()
    box.accept()
    qtbot.waitUntil(lambda: gpu0.data(roles.RESERVATION_ROLE) is None, timeout=10_000)
    gpu3 = console.window.session.items.gpu_index(console.target, 3)
    assert gpu3.data(roles.RESERVATION_ROLE).gpu_indices == (3,)  # the other GPU stays
    menu.deleteLater()


def run_sleeper(qtbot, console: Console, gpu: int) -> tuple[str, int]:
    """A sleeper workload on `gpu`, shown in the GPU's process table; (id, table row)."""
    workload_id = submit(console)
    assign = pb.AssignWorkloadRequest(workload_id=workload_id, gpu_indices=[gpu], actor="alice")
    console.stub.AssignWorkload(assign, timeout=5)
    console.window.grid.select(console.target, gpu)
    table = console.window.detail.processes

    def sleeper_row() -> int | None:
        rows = range(table.rowCount())
        return next((r for r in rows if table.process(r).command == "sleep 300"), None)

    qtbot.waitUntil(lambda: sleeper_row() is not None, timeout=10_000)
    return workload_id, sleeper_row()  # type: ignore[return-value]


def test_kill_from_the_process_table_ends_the_sleeper(qtbot, console: Console) -> None:
    workload_id, row = run_sleeper(qtbot, console, gpu=2)
    process = console.window.detail.processes.process(row)
    menu = console.window.detail.process_menu(row)
    (kill,) = menu.actions()
    assert kill.text() == f"Kill pid {process.pid}…"
    kill.trigger()
    menu.deleteLater()
    dialog = console.window.control.prompts.dialog
    assert isinstance(dialog, KillDialog) and dialog.isVisible()
    named = " ".join(label.text() for label in dialog.findChildren(type(dialog.question)))
    for fact in (str(process.pid), "alice", "sleep 300", "node-a", "GPU 2"):
        assert fact in named, fact
    assert console.sent == []
    with qtbot.waitSignal(console.window.session.pump.commandFinished, timeout=30_000) as done:
        dialog.grace.setValue(5)
        dialog.accept()
    result = done.args[0]
    assert result.ok, result.message
    assert isinstance(result.payload, KillReport) and result.payload.outcome == "terminated"
    assert console.sent == [f"kill pid {process.pid} on node-a GPU 2"]
    assert f"kill pid {process.pid} on node-a GPU 2: terminated" in (
        console.window.statusBar().currentMessage()
    )
    qtbot.waitUntil(lambda: console.workload(workload_id).state.ended, timeout=10_000)
    table = console.window.detail.processes
    qtbot.waitUntil(
        lambda: all(table.process(r).pid != process.pid for r in range(table.rowCount())),
        timeout=10_000,
    )


def test_process_dragged_onto_the_kill_zone_asks_first(qtbot, console: Console) -> None:
    _, row = run_sleeper(qtbot, console, gpu=1)
    detail = console.window.detail
    process = detail.processes.process(row)
    mime = detail.processes.mimeData([detail.processes.index(row, 0)])
    zone = detail.kill_zone
    assert drag_over(zone, mime, zone.rect().center()).isAccepted()
    assert zone.verdict.ok and zone.text().startswith(f"Release to kill pid {process.pid}")
    assert zone.property("verdict") == "accept"
    drop(zone, mime, zone.rect().center())
    dialog = console.window.control.prompts.dialog
    assert isinstance(dialog, KillDialog) and dialog.victim.process == process
    dialog.reject()  # cancel: nothing is sent, the sleeper lives on
    assert console.sent == [] and zone.property("verdict") == ""
    assert any(p.pid == process.pid for p in console.fleet.node(console.target).latest[1].processes)


def test_submit_from_the_queue_panel_and_read_the_output(qtbot, console: Console) -> None:
    panel = console.window.control.workload_panel
    panel.submit.click()
    dialog = console.window.control.prompts.dialog
    assert isinstance(dialog, SubmitDialog)
    dialog.command.setText("echo 'hello from the queue'")
    dialog.owner.setCurrentText("team:ml")
    dialog.auto_place.setChecked(True)  # the node starts it on GPUs that fit
    with qtbot.waitSignal(console.window.session.pump.commandFinished, timeout=10_000) as done:
        dialog.accept()
    assert done.args[0].ok, done.args[0].message
    submitted = done.args[0].payload
    assert submitted.argv == ("echo", "hello from the queue") and submitted.owner == "team:ml"
    assert console.sent == [f"submit echo to {console.target}"]
    qtbot.waitUntil(
        lambda: console.workload(submitted.id).state is WorkloadState.FINISHED, timeout=10_000
    )
    assert panel.select(console.target, submitted.id) and panel.output.isEnabled()
    with qtbot.waitSignal(console.window.session.pump.commandFinished, timeout=10_000):
        panel.output.click()
    (viewer,) = console.window.findChildren(OutputDialog)
    assert viewer.isVisible() and "hello from the queue" in viewer.text.toPlainText()
    viewer.close()
