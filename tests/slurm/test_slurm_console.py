"""The console's Slurm views and actions against a real Slurm and real daemons, offscreen.

Two daemons named gpu01 and gpu02 (Slurm's node names) under one console whose
profile points at the test cluster's slurmrestd. Each action is checked in
Slurm's own answer (`scontrol show`) and in the node's audit log (QueryAudit):
a pending job dropped on a tile is steered there, a node drained and resumed
from its tile's menu, a Slurm job's process cancelled from the process menu.
Drags are replayed as real drag events handed to the grid (QDrag.exec would
block offscreen); their MIME data comes from the Slurm queue's own model.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import grpc
import pytest
from PySide6.QtCore import QDateTime, QMimeData, QPoint, QPointF, Qt, QTime
from PySide6.QtGui import QAction, QDragEnterEvent, QDragMoveEvent, QDropEvent
from PySide6.QtWidgets import QMessageBox
from pytestqt.qtbot import QtBot

from console.fleet.slurm_view import SlurmReserve
from console.fleet.updates import LinkState
from console.main_window import MainWindow
from console.qt.mime import holder_mime, read_node
from console.session import ConsoleSession
from console.settings import SlurmProfile
from console.views.common.drag_image import MAX_SIZE
from console.views.slurm.drain_zone import IDLE_TEXT, DrainZone
from console.views.slurm.slurm_prompts import DrainDialog
from console.views.slurm.slurm_reserve_dialog import SlurmReserveDialog
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.backends.simulated.backend import SimulatedBackend
from node_daemon.commands.backend_choice import simulated_backend
from node_daemon.server import NodeDaemon
from tests.conftest import FAST_CONFIG, DaemonFactory, wait_for
from tests.slurm.harness import REST_USER, SlurmCluster

NODES = ("gpu01", "gpu02")


def field(shown: str, key: str) -> str:
    match = re.search(rf"(?:^|\s){key}=(\S*)", shown)
    assert match is not None, f"{key} not in {shown!r}"
    return match[1]


@dataclass
class Console:
    window: MainWindow
    targets: dict[str, str]  # Slurm node name -> the console's target
    daemons: dict[str, NodeDaemon]
    backends: dict[str, SimulatedBackend]

    def audit(self, node: str, method: str) -> list[pb.AuditRecord]:
        with grpc.insecure_channel(self.targets[node]) as channel:
            answer = pb_grpc.NodeServiceStub(channel).QueryAudit(pb.QueryAuditRequest(), timeout=5)
        return [r for r in answer.records if r.method == method]


@pytest.fixture
def console(
    request: pytest.FixtureRequest, qtbot, slurm: SlurmCluster, start_daemon: DaemonFactory
) -> Iterator[Console]:
    """The console of Slurm user root (Slurm's administrator here), or the user parametrized."""
    user = getattr(request, "param", "root")
    # Odd seeds: the simulator's own processes belong to no Slurm job (only real ones do).
    config = replace(FAST_CONFIG, gpus=8, seed=1)
    backends = {name: simulated_backend(config) for name in NODES}
    daemons = {name: start_daemon(backends[name], gpus=8, hostname=name, seed=1)
               for name in NODES}  # fmt: skip
    targets = {name: str(d.address) for name, d in daemons.items()}
    profile = SlurmProfile(slurm.rest_url, user, conf=slurm.layout.conf)
    session = ConsoleSession(list(targets.values()), slurm=profile,
                             slurm_token=lambda: slurm.token(user))  # fmt: skip
    window = MainWindow(session)
    qtbot.addWidget(window)
    window.resize(1400, 900)
    session.start()
    window.show()
    window.tabs.setCurrentIndex(window.tabs.indexOf(window.slurm.panel.parentWidget()))  # type: ignore[union-attr]
    for target in targets.values():
        node = session.fleet.node(target)
        qtbot.waitUntil(lambda n=node: n.state is LinkState.CONNECTED and len(n.latest) == 8,
                        timeout=15_000)  # fmt: skip
    qtbot.waitUntil(lambda: set(window.slurm.watch.view.nodes) >= set(NODES), timeout=15_000)  # type: ignore[union-attr]
    yield Console(window, targets, daemons, backends)
    session.stop()


def undrain(slurm: SlurmCluster, node: str) -> None:
    """Resume the node if a test left it drained (Slurm refuses to resume an idle node)."""
    if "DRAIN" in field(slurm.scontrol_show("node", node), "State"):
        slurm.run("scontrol", "update", f"nodename={node}", "state=resume")


def job_pid(job_id: int) -> int | None:
    """The pid of the job's `sleep`, found by its environment (SLURM_JOB_ID)."""
    mark = f"SLURM_JOB_ID={job_id}\0".encode()
    for proc in Path("/proc").iterdir():
        try:
            if (proc.name.isdigit() and (proc / "cmdline").read_bytes().startswith(b"sleep\0")
                    and mark in (proc / "environ").read_bytes()):  # fmt: skip
                return int(proc.name)
        except OSError:
            continue  # ended meanwhile
    return None


def job_mime(console: Console, job_id: int) -> QMimeData:
    """What dragging the job's row out of the Slurm queue carries."""
    panel = console.window.slurm.panel  # type: ignore[union-attr]
    rows = [panel.proxy.index(r, 0) for r in range(panel.proxy.rowCount())]
    index = next(i for i in rows if i.data() == str(job_id))
    assert panel.proxy.flags(index) & Qt.ItemFlag.ItemIsDragEnabled
    return panel.proxy.mimeData([index])


def drag_and_drop(console: Console, mime: QMimeData, target: str) -> tuple[bool, str]:
    """Hover over GPU 0's tile of `target`, then drop: (accepted, the hover's verdict)."""
    grid = console.window.grid
    tile = grid.tile_rect(target, 0)
    assert tile is not None
    pos, buttons = tile.center(), Qt.MouseButton.LeftButton
    keys, copy = Qt.KeyboardModifier.NoModifier, Qt.DropAction.CopyAction
    enter = QDragEnterEvent(pos, copy, mime, buttons, keys)
    grid.dragEnterEvent(enter)
    assert enter.isAccepted()
    grid.dragMoveEvent(QDragMoveEvent(pos, copy, mime, buttons, keys))
    assert grid.hover is not None
    verdict = grid.hover[1].verdict
    event = QDropEvent(QPointF(pos), copy, mime, buttons, keys)
    grid.dropEvent(event)
    return event.isAccepted(), verdict.reason


def menu_action(actions: list[QAction], starts: str) -> QAction:
    found = [a for a in actions if a.text().startswith(starts)]
    assert found, f"no {starts!r} in {[a.text() for a in actions]}"
    return found[0]


def test_a_pending_job_dropped_on_a_tile_is_steered_there(
    qtbot, console: Console, slurm: SlurmCluster, cleanup_jobs: list[int]
) -> None:
    job_id = int(slurm.run("sbatch", "--parsable", "--begin=now+1hour", "--job-name=train-llm",
                           "--gres=gpu:2", "--wrap", "sleep 600").strip())  # fmt: skip
    cleanup_jobs.append(job_id)
    watch = console.window.slurm.watch  # type: ignore[union-attr]
    qtbot.waitUntil(lambda: watch.view.job(job_id) is not None, timeout=15_000)
    panel = console.window.slurm.panel  # type: ignore[union-attr]
    panel.filter.setText("train-llm")
    assert panel.proxy.rowCount() == 1
    pump = console.window.session.pump
    with qtbot.waitSignal(pump.commandFinished, timeout=15_000) as done:
        accepted, verdict = drag_and_drop(
            console, job_mime(console, job_id), console.targets["gpu02"]
        )
    assert accepted
    assert verdict == f"Steer Slurm job {job_id} (train-llm) to gpu02: 8 of 8 GPUs free"
    assert done.args[0].ok, done.args[0].message
    assert field(slurm.scontrol_show("job", str(job_id)), "ReqNodeList") == "gpu02"
    record = console.audit("gpu02", "slurm/steer_job")[-1]
    assert (record.target, record.result) == (f"job={job_id}", "OK")
    assert '"nodelist": "gpu02"' in record.params


def test_a_drained_node_refuses_the_drop_in_slurms_words(
    qtbot, console: Console, slurm: SlurmCluster, cleanup_jobs: list[int]
) -> None:
    job_id = int(slurm.run("sbatch", "--parsable", "--begin=now+1hour", "--wrap",
                           "sleep 600").strip())  # fmt: skip
    cleanup_jobs.append(job_id)
    watch = console.window.slurm.watch  # type: ignore[union-attr]
    slurm.run("scontrol", "update", "nodename=gpu01", "state=drain", "reason=disk full")
    try:
        watch.read_now()
        qtbot.waitUntil(lambda: watch.view.job(job_id) is not None
                        and watch.view.nodes["gpu01"].drained, timeout=15_000)  # fmt: skip
        accepted, verdict = drag_and_drop(
            console, job_mime(console, job_id), console.targets["gpu01"]
        )
    finally:
        undrain(slurm, "gpu01")
    assert not accepted
    assert verdict.startswith("gpu01 is") and verdict.endswith("in Slurm: disk full")
    assert field(slurm.scontrol_show("job", str(job_id)), "ReqNodeList") == "(null)"


def drain_with_reason(qtbot: QtBot, window: MainWindow, slurm: SlurmCluster, reason: str) -> None:
    """Answer the drain dialog asked for gpu01 with `reason`: Slurm drains gpu01 for that
    reason, and the console's Slurm watch sees it drained."""
    dialog = window.slurm.prompts.dialog  # type: ignore[union-attr]
    assert isinstance(dialog, DrainDialog)
    dialog.reason.setText(reason)
    with qtbot.waitSignal(window.session.pump.commandFinished, timeout=15_000) as done:
        dialog.accept()
    assert done.args[0].ok, done.args[0].message
    shown = slurm.scontrol_show("node", "gpu01")
    assert "DRAIN" in field(shown, "State") and f"Reason={reason}" in shown
    watch = window.slurm.watch  # type: ignore[union-attr]
    qtbot.waitUntil(lambda: watch.view.nodes["gpu01"].drained, timeout=15_000)


def test_drain_and_resume_from_the_tile_menu(qtbot, console: Console, slurm: SlurmCluster) -> None:
    window, target = console.window, console.targets["gpu01"]
    prompts, pump = window.slurm.prompts, window.session.pump  # type: ignore[union-attr]
    try:
        menu_action(window.grid.context_menu(target, 3).actions(), "Drain gpu01 in Slurm").trigger()
        dialog = prompts.dialog
        assert isinstance(dialog, DrainDialog)
        assert (
            dialog.focusWidget() in (None, dialog.reason)
            and not dialog.buttons.button(dialog.buttons.StandardButton.Ok).isEnabled()
        )
        drain_with_reason(qtbot, window, slurm, "fan swap, ticket 4711")
        resume = menu_action(window.grid.context_menu(target, 3).actions(), "Resume gpu01")
        with qtbot.waitSignal(pump.commandFinished, timeout=15_000) as done:
            resume.trigger()
        assert done.args[0].ok, done.args[0].message
    finally:
        undrain(slurm, "gpu01")
    assert "DRAIN" not in field(slurm.scontrol_show("node", "gpu01"), "State")
    drained = console.audit("gpu01", "slurm/drain")[-1]
    assert (drained.target, drained.result) == ("node=gpu01", "OK")
    assert "fan swap, ticket 4711" in drained.params
    assert console.audit("gpu01", "slurm/resume")[-1].result == "OK"
    assert console.audit("gpu02", "slurm/drain") == []


def hover_and_drop(zone: DrainZone, mime: QMimeData) -> tuple[bool, str]:
    """Hover a drag over the drain zone, then drop: (accepted, what the zone said)."""
    pos, buttons = zone.rect().center(), Qt.MouseButton.LeftButton
    keys, move = Qt.KeyboardModifier.NoModifier, Qt.DropAction.MoveAction
    zone.dragEnterEvent(QDragEnterEvent(pos, move, mime, buttons, keys))
    zone.dragMoveEvent(QDragMoveEvent(pos, move, mime, buttons, keys))
    said = zone.text()
    event = QDropEvent(QPointF(pos), move, mime, buttons, keys)
    zone.dropEvent(event)
    return event.isAccepted(), said


def test_a_node_dragged_by_its_title_onto_the_drain_zone_is_drained_in_slurm(
    qtbot, console: Console, slurm: SlurmCluster
) -> None:
    window, target = console.window, console.targets["gpu01"]
    zone, prompts = window.slurm.panel.drain_zone, window.slurm.prompts  # type: ignore[union-attr]
    grid = window.grid
    # The drag starts on the node's title line (not on a tile), with the compact label.
    tile = grid.tile_rect(target, 0)
    assert tile is not None and grid.header_at(tile.center()) is None
    block = next(b for b in grid.blocks if tile in b.tiles)
    assert grid.header_at(block.rect.topLeft() + QPoint(40, 6)) == target
    data = grid.node_drag_data(target)
    assert read_node(data) == (target, "gpu01")
    label = grid.node_drag_label(data)
    assert label.width() <= MAX_SIZE.width() * label.devicePixelRatio()
    try:
        accepted, said = hover_and_drop(zone, data)
        assert accepted and said == "Release to drain gpu01 in Slurm (a reason is asked)"
        assert zone.text() == IDLE_TEXT
        drain_with_reason(qtbot, window, slurm, "PSU swap, ticket 4712")
        # Drained already: the zone says so, in Slurm's words, and takes no drop.
        accepted, said = hover_and_drop(zone, data)
        assert not accepted and prompts.dialog is None  # no reason asked
        assert (
            said == "Cannot drain: gpu01 is drained already (PSU swap, ticket 4712): "
            "resume it from its menu"
        )
    finally:
        undrain(slurm, "gpu01")
    record = console.audit("gpu01", "slurm/drain")[-1]
    assert (record.target, record.result) == ("node=gpu01", "OK")
    assert "PSU swap, ticket 4712" in record.params
    # Something that is not a node is not followed at all.
    person = holder_mime("root")  # held: the event does not own its data
    enter = QDragEnterEvent(zone.rect().center(), Qt.DropAction.MoveAction, person,
                            Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)  # fmt: skip
    zone.dragEnterEvent(enter)
    assert not enter.isAccepted() and zone.text() == IDLE_TEXT


def test_a_slurm_jobs_process_is_cancelled_through_slurm(
    qtbot, console: Console, slurm: SlurmCluster, cleanup_jobs: list[int]
) -> None:
    window, target, gpu = console.window, console.targets["gpu01"], 2
    # A real Slurm job on gpu01 (slurmd runs it here); its process shown on a simulated GPU
    # as a launched workload's is, its job read from /proc as the NVML backend reads it.
    job_id = int(slurm.run("sbatch", "--parsable", "--nodelist=gpu01", "--gres=gpu:1",
                           "--job-name=sim-train", "--output=/dev/null",
                           "--wrap", "sleep 600").strip())  # fmt: skip
    cleanup_jobs.append(job_id)
    wait_for(lambda: job_pid(job_id) is not None, 30, f"job {job_id}'s sleep to run")
    pid = job_pid(job_id)
    assert pid is not None
    console.backends["gpu01"].attach_process(gpu, pid, "root", "sleep 600", 2**30, 0)
    watch = window.slurm.watch  # type: ignore[union-attr]
    watch.read_now()
    qtbot.waitUntil(lambda: watch.view.job(job_id) is not None, timeout=15_000)
    window.detail.show_gpu(target, gpu)
    processes = window.detail.processes

    def row_of_job() -> int | None:
        window.detail.show_gpu(target, gpu)
        rows = [processes.kill_target(r) for r in range(processes.rowCount())]
        return next((r for r, k in enumerate(rows) if k and k.process.pid == pid
                     and k.process.slurm_job_id == str(job_id)), None)  # fmt: skip

    qtbot.waitUntil(lambda: row_of_job() is not None, timeout=15_000)
    row = row_of_job()
    assert row is not None
    entry = menu_action(window.detail.process_menu(row).actions(), "Cancel Slurm job")
    assert entry.text() == f"Cancel Slurm job {job_id} (root, sim-train)…"
    entry.trigger()
    box = window.slurm.prompts.dialog  # type: ignore[union-attr]
    assert isinstance(box, QMessageBox) and f"Slurm job {job_id} (root, sim-train)" in box.text()
    with qtbot.waitSignal(window.session.pump.commandFinished, timeout=15_000) as done:
        box.button(QMessageBox.StandardButton.Yes).click()
    assert done.args[0].ok, done.args[0].message
    # A running job passes through COMPLETING while slurmd ends its processes.
    state = lambda: field(slurm.scontrol_show("job", str(job_id)), "JobState")  # noqa: E731
    wait_for(lambda: state() != "COMPLETING", 30, "Slurm to finish cancelling")
    assert state() == "CANCELLED"
    wait_for(lambda: job_pid(job_id) is None, 30, "the job's process to end")
    record = console.audit("gpu01", "slurm/cancel_job")[-1]
    assert (record.target, record.result) == (f"job={job_id}", "OK")


# The harness's slurmrestd account: a plain user, in no Slurm admin list.
@pytest.mark.parametrize("console", [REST_USER], indirect=True)
def test_slurm_decides_what_each_person_may_do_and_its_refusal_is_audited(
    qtbot, console: Console, slurm: SlurmCluster, cleanup_jobs: list[int]
) -> None:
    """Steering root's job as a plain user is refused by Slurm, not by gpufleet; audited."""
    job_id = int(slurm.run("sbatch", "--parsable", "--begin=now+1hour", "--job-name=roots",
                           "--wrap", "sleep 600").strip())  # fmt: skip
    cleanup_jobs.append(job_id)
    watch = console.window.slurm.watch  # type: ignore[union-attr]
    qtbot.waitUntil(lambda: watch.view.job(job_id) is not None, timeout=15_000)
    pump = console.window.session.pump
    with qtbot.waitSignal(pump.commandFinished, timeout=15_000) as done:
        accepted, _ = drag_and_drop(console, job_mime(console, job_id), console.targets["gpu02"])
    assert accepted  # Slurm's view allows it; Slurm's permissions decide
    refusal = done.args[0].message
    # Slurm 22.05's word for "not your job and you are no operator".
    assert not done.args[0].ok and "Invalid user id" in refusal, refusal
    assert field(slurm.scontrol_show("job", str(job_id)), "ReqNodeList") == "(null)"
    record = console.audit("gpu02", "slurm/steer_job")[-1]
    assert record.result == refusal and record.user == "local"


def test_a_person_dropped_on_selected_nodes_reserves_them_in_slurm_then_released(
    qtbot, console: Console, slurm: SlurmCluster
) -> None:
    window, grid = console.window, console.window.grid
    watch, prompts = window.slurm.watch, window.slurm.prompts  # type: ignore[union-attr]
    pump = window.session.pump
    grid.select(console.targets["gpu01"], 0)
    grid.select(console.targets["gpu02"], 0, add=True)
    accepted, verdict = drag_and_drop(console, holder_mime("root"), console.targets["gpu02"])
    assert accepted and verdict == "Reserve gpu01, gpu02 in Slurm for root…"
    dialog = prompts.dialog
    assert isinstance(dialog, SlurmReserveDialog)
    name = dialog.name.text()
    assert name.startswith("gpufleet-root-")
    dialog.minutes.setValue(90)
    dialog.flags.setText("ignore_jobs")
    try:
        with qtbot.waitSignal(pump.commandFinished, timeout=15_000) as done:
            dialog.accept()
        assert done.args[0].ok, done.args[0].message
        shown = slurm.scontrol_show("reservation", name)
        assert field(shown, "Nodes") == "gpu[01-02]" and field(shown, "Users") == "root"
        assert field(shown, "Duration") == "01:30:00" and "IGNORE_JOBS" in field(shown, "Flags")
        for node in NODES:
            record = console.audit(node, "slurm/reserve")[-1]
            assert (record.target, record.result) == (f"reservation={name}", "OK")
        # Listed in the Slurm panel; released from there after a question.
        panel = window.slurm.panel  # type: ignore[union-attr]
        qtbot.waitUntil(
            lambda: any(r.name == name for r in watch.view.reservations), timeout=15_000
        )
        row = next(i for i, r in enumerate(watch.view.reservations) if r.name == name)
        panel.reservation_table.setCurrentIndex(panel.reservations.index(row, 0))
        panel.release.click()
        box = prompts.dialog
        assert isinstance(box, QMessageBox) and name in box.text()
        with qtbot.waitSignal(pump.commandFinished, timeout=15_000) as done:
            box.button(QMessageBox.StandardButton.Yes).click()
        assert done.args[0].ok, done.args[0].message
    finally:
        if name in slurm.run("scontrol", "-o", "show", "reservation"):
            slurm.run("scontrol", "delete", f"reservationname={name}")
    assert name not in slurm.run("scontrol", "-o", "show", "reservation")
    assert console.audit("gpu01", "slurm/release")[-1].result == "OK"
    assert console.audit("gpu02", "slurm/release")[-1].target == f"reservation={name}"


def test_the_reserve_dialog_starts_now_or_later_and_keeps_end_and_duration_together(qtbot) -> None:
    opened = 1_800_000_000  # the dialog's clock: 2027-01-15 08:00 UTC
    dialog = SlurmReserveDialog(SlurmReserve("alice", ("t1",), ("gpu01",)), clock=lambda: opened)
    qtbot.addWidget(dialog)
    assert dialog.starts_now() and dialog.ask().start is None  # "starttime=now"
    assert dialog.start.dateTime().secsTo(dialog.end.dateTime()) == 120 * 60
    dialog.minutes.setValue(90)  # the end follows the duration...
    assert dialog.start.dateTime().secsTo(dialog.end.dateTime()) == 90 * 60
    dialog.end.setDateTime(dialog.start.dateTime().addSecs(4 * 3600))  # ...and the reverse
    assert dialog.minutes.value() == 240
    dialog.end.setDateTime(dialog.start.dateTime().addSecs(-600))  # before the start: refused
    assert dialog.minutes.value() == 240
    assert dialog.start.dateTime().secsTo(dialog.end.dateTime()) == 240 * 60
    later = QDateTime.fromSecsSinceEpoch(opened + 86_400)
    dialog.start.setDateTime(later)  # tomorrow: a future start, the end moves with it
    ask = dialog.ask()
    assert not dialog.starts_now() and ask.start is not None
    assert ask.start.timestamp() == opened + 86_400 and ask.duration is not None
    assert ask.duration.total_seconds() == 240 * 60
    assert dialog.end.dateTime().toSecsSinceEpoch() == opened + 86_400 + 240 * 60


def test_a_reservation_for_later_starts_when_asked_in_slurm(
    qtbot, console: Console, slurm: SlurmCluster
) -> None:
    window = console.window
    prompts, pump = window.slurm.prompts, window.session.pump  # type: ignore[union-attr]
    window.grid.select(console.targets["gpu01"], 0)
    accepted, _ = drag_and_drop(console, holder_mime("root"), console.targets["gpu01"])
    assert accepted
    dialog = prompts.dialog
    assert isinstance(dialog, SlurmReserveDialog)
    name = dialog.name.text()
    start = QDateTime.currentDateTime().addDays(1)
    start.setTime(QTime(10, 0))
    dialog.start.setDateTime(start)
    dialog.minutes.setValue(45)
    try:
        with qtbot.waitSignal(pump.commandFinished, timeout=15_000) as done:
            dialog.accept()
        assert done.args[0].ok, done.args[0].message
        shown = slurm.scontrol_show("reservation", name)
        # scontrol shows slurmctld's local time, which is this machine's.
        assert field(shown, "StartTime") == start.toString("yyyy-MM-ddTHH:mm:ss")
        assert field(shown, "EndTime") == start.addSecs(45 * 60).toString("yyyy-MM-ddTHH:mm:ss")
        assert field(shown, "Nodes") == "gpu01" and field(shown, "Users") == "root"
    finally:
        if name in slurm.run("scontrol", "-o", "show", "reservation"):
            slurm.run("scontrol", "delete", f"reservationname={name}")
