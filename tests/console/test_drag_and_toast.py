"""A drag image that leaves its target in sight; toasts that cover no table rows, leave
the tiles they are about in sight, and go once their condition is over.

Real widgets in the real window.
"""

from __future__ import annotations

import dataclasses
import time

import pytest
from PySide6.QtCore import QPoint, QRect, QSize
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QAbstractItemView, QApplication, QWidget

from console.fleet.alert_rows import AlertRow
from console.fleet.alerts import EventRow
from console.fleet.model import FleetModel
from console.fleet.not_responding import is_local
from console.fleet.process_row import ProcessRow
from console.main_window import MainWindow
from console.qt.mime import PROCESS_MIME
from console.qt.people_model import PeopleListModel
from console.qt.process_model import ProcessTableModel
from console.session import ConsoleSession
from console.views.common.drag_image import (
    MAX_SIZE,
    CompactDragList,
    CompactDragTable,
    compact_drag,
)
from console.views.control.people_panel import PeoplePanel
from console.views.detail.process_table import ProcessTable
from gpufleet.v1.alert_severity import Severity
from tests.console.hand_fed import gpus_of, node_up, samples, simulated_node

LONG = "python train.py --config configs/llama-8b-sft.yaml --epochs 40 --lr 3e-5 " * 4
TRAINER = ProcessRow(pid=4242, user="alice", command=LONG, gpu_memory_bytes=8 << 30,
                     start_time_unix_ms=1_700_000_000_000, container_id=None,
                     slurm_job_id="812")  # fmt: skip


def test_a_process_drag_is_a_small_label_beside_the_cursor(qtbot) -> None:
    model = ProcessTableModel()
    model.set_processes((TRAINER,), ("10.0.0.1:50051", "node-a", 2))
    table = ProcessTable(model)
    qtbot.addWidget(table)
    table.resize(1300, 120)
    table.show()
    table.selectRow(0)
    drag = compact_drag(table)
    assert drag is not None and drag.mimeData().hasFormat(PROCESS_MIME)
    pixmap = drag.pixmap()
    size = pixmap.deviceIndependentSize().toSize()
    assert size.width() <= MAX_SIZE.width() and size.height() <= MAX_SIZE.height(), size
    row_width = sum(table.columnWidth(c) for c in range(model.columnCount()))
    assert row_width > 4 * size.width()  # what Qt drew before: the whole row
    # The cursor is at the hot spot: outside the label, so the target under it shows.
    assert not QRect(QPoint(0, 0), size).contains(drag.hotSpot())
    assert drag.hotSpot().x() < 0 and drag.hotSpot().y() < 0
    assert label_text(pixmap.toImage()) > 0  # the label is drawn, not blank


def label_text(image: QImage) -> int:
    """How many pixels differ from the label's fill: its text."""
    fill = image.pixel(2, image.height() // 2)
    xs, ys = range(4, image.width() - 4), range(2, image.height() - 2)
    return sum(1 for x in xs for y in ys if image.pixel(x, y) != fill)


def test_people_and_workload_drags_use_the_label(qtbot) -> None:
    fleet = FleetModel()
    panel = PeoplePanel(PeopleListModel(fleet, ["alice", "team:ml"]))
    qtbot.addWidget(panel)
    panel.show()
    assert isinstance(panel.list, CompactDragList)
    panel.list.setCurrentIndex(panel.person_index("team:ml"))
    drag = compact_drag(panel.list)
    assert drag is not None and drag.mimeData().text() == "team:ml"
    size = drag.pixmap().deviceIndependentSize().toSize()
    assert size.width() <= MAX_SIZE.width() and size.height() <= MAX_SIZE.height()
    window = MainWindow(ConsoleSession([]))
    qtbot.addWidget(window)
    assert isinstance(window.control.workload_panel.table, CompactDragTable)
    assert isinstance(window.detail.process_table, CompactDragTable)


# -- toasts ---------------------------------------------------------------------------


def table_rects(window: QWidget) -> list[tuple[str, QRect]]:
    """Every visible table's viewport, in the window's coordinates."""
    found = []
    for view in window.findChildren(QAbstractItemView):
        port = view.viewport()
        if view.isVisible() and port.isVisible() and port.width() > 0:
            found.append((view.objectName(), QRect(port.mapTo(window, QPoint(0, 0)), port.size())))
    return found


@pytest.mark.parametrize("size", [QSize(1366, 768), QSize(1920, 1080), QSize(3840, 2160)])
def test_a_toast_covers_no_table_rows(qtbot, size: QSize) -> None:
    window = MainWindow(ConsoleSession([]))
    qtbot.addWidget(window)
    window.resize(size)
    window.show()
    qtbot.waitExposed(window)
    for tab in range(window.tabs.count()):
        if not window.tabs.isTabVisible(tab):
            continue
        window.tabs.setCurrentIndex(tab)
        window.alerts.toast.show_notice("Silence ending", "Silence of gpu-node-0* throttle by erin "
                                 "ends in 5 min. " * 3, "silences")  # fmt: skip
        QApplication.processEvents()
        toast = window.alerts.toast.geometry()
        assert window.rect().contains(toast), (toast, window.rect())
        rects = table_rects(window)
        assert len(rects) >= 2, rects  # the tab's table and the GPU's processes at least
        for name, rect in rects:
            assert not rect.intersects(toast), f"the toast {toast} covers {name} {rect}"


def test_new_figures_of_the_same_processes_keep_the_selection_and_a_press(qtbot) -> None:
    """A sample that only changes figures (SM %, CPU, memory) updates the rows in place:
    no reset, so a selection (and a press that is about to become a drag) survives."""
    model = ProcessTableModel()
    where = ("10.0.0.1:50051", "node-a", 2)
    other = dataclasses.replace(TRAINER, pid=TRAINER.pid + 1, command="python eval.py")
    model.set_processes((TRAINER, other), where)
    table = ProcessTable(model)
    qtbot.addWidget(table)
    table.show()
    table.selectRow(1)
    resets: list[bool] = []
    model.modelReset.connect(lambda: resets.append(True))
    busier = dataclasses.replace(other, sm_util_pct=97.0, cpu_pct=180.0)
    with qtbot.waitSignal(model.dataChanged, timeout=1000):
        model.set_processes((TRAINER, busier), where)
    assert resets == [] and model.process(1).sm_util_pct == 97.0
    assert [i.row() for i in table.selectionModel().selectedRows()] == [1]
    # Another process in the same place (a reused pid: another start) is a new table.
    reborn = dataclasses.replace(busier, start_time_unix_ms=(busier.start_time_unix_ms or 0) + 1)
    model.set_processes((TRAINER, reborn), where)
    assert resets == [True]


# -- a toast and the GPU it is about ---------------------------------------------------

NODES = [f"10.0.0.{n}:50051" for n in range(1, 5)]
GPUS = 4


def fleet_window(qtbot, size: QSize) -> MainWindow:
    """The window over 4 nodes of 4 GPUs that have each sent one batch (no daemon)."""
    session = ConsoleSession(NODES)
    for n, target in enumerate(NODES, start=1):
        session.fleet.apply_all(node_up(target, simulated_node(f"gpu-node-0{n}", gpus_of(GPUS))))
        session.fleet.apply_all([samples(target, time.time(), GPUS, {})])
    window = MainWindow(session)
    qtbot.addWidget(window)
    window.resize(size)
    window.show()
    qtbot.waitExposed(window)
    QApplication.processEvents()
    return window


def lost(target: str, gpu: int) -> AlertRow:
    ms = int(time.time() * 1000)
    return AlertRow(
        target, f"lost-{gpu}", f"gpu_lost/gpu{gpu}", "gpu_lost", Severity.CRITICAL, True, gpu,
        f"GPU-{gpu}", None, None, "", f"GPU {gpu} is lost: fell off the bus", ms, ms, None, 1,
        "", None, None, "", "",
    )  # fmt: skip


def raise_alert(window: MainWindow, alert: AlertRow) -> None:
    """The alert's raise, as a frame brings it: into the book, then to the notifier."""
    event = EventRow(alert.target, 1, alert.started_unix_ms, "alert_raised", alert.gpu_index,
                     alert.summary, "", alert, False)  # fmt: skip
    window.session.fleet.alerts.add_event(event, "journal")
    window.alerts.notifier.on_events_arrived([event])
    QApplication.processEvents()


def tile_rects(window: MainWindow, target: str, gpu: int | None) -> list[QRect]:
    grid = window.grid
    return [QRect(grid.mapTo(window, r.topLeft()), r.size())
            for r in grid.rects_of(target, gpu)]  # fmt: skip


def under_the_first_corner(window: MainWindow) -> list[tuple[str, int]]:
    """The tiles a toast in the grid's top-right corner would cover."""
    toast = window.alerts.toast
    scroll = window.grid_part.fleet_scroll
    corner = scroll.mapTo(window, QPoint(scroll.width(), 0))
    spot = QRect(corner.x() - toast.width() - 16, corner.y() + 16, toast.width(), 120)
    return [(t, g) for t in NODES for g in range(GPUS)
            if any(spot.intersects(r) for r in tile_rects(window, t, g))]  # fmt: skip


@pytest.mark.parametrize("size", [QSize(1366, 768), QSize(1920, 1080)])
def test_a_critical_toast_leaves_the_tile_of_its_gpu_in_sight(qtbot, size: QSize) -> None:
    """Issue #33: a critical toast hid gpu-node-02's GPU 1-3 tiles, the GPUs it was about."""
    window = fleet_window(qtbot, size)
    covered = under_the_first_corner(window)
    assert covered, "no tile under the grid's top-right corner: the test would prove nothing"
    for target, gpu in covered:
        alert = dataclasses.replace(lost(target, gpu), id=f"lost-{target}-{gpu}")
        raise_alert(window, alert)
        toast = window.alerts.toast
        assert toast.isVisible() and toast.alert is not None and toast.alert.uid == alert.uid
        geometry = toast.geometry()
        [tile] = tile_rects(window, target, gpu)
        assert not geometry.intersects(tile), f"the toast {geometry} covers GPU {gpu} {tile}"
        assert window.rect().contains(geometry)
        for name, rect in table_rects(window):
            assert not rect.intersects(geometry), f"the toast covers {name}"


@pytest.mark.parametrize("size", [QSize(1366, 768), QSize(1920, 1080)])
def test_a_self_healing_toast_leaves_the_tiles_it_is_about_in_sight(qtbot, size: QSize) -> None:
    """The docs' health-tiles screenshot: "Self-healing on gpu-node-02" covered the very GPU
    it was about (a notice, not an alert, had nothing to keep in sight)."""
    window = fleet_window(qtbot, size)
    covered = under_the_first_corner(window)
    assert covered, "no tile under the grid's top-right corner: the test would prove nothing"
    target, gpu = covered[0]
    window.alerts.toast.show_notice("Self-healing on node", "drained", "events", [(target, gpu)])
    toast = window.alerts.toast
    assert toast.isVisible()
    [tile] = tile_rects(window, target, gpu)
    assert not toast.geometry().intersects(tile), (toast.geometry(), tile)


def test_a_node_toast_leaves_the_nodes_block_in_sight_and_goes_when_it_answers(qtbot) -> None:
    """Issue #33: "not responding" stayed up after the node recovered while the status bar
    read 4/4. The node goes quiet (the real watchdog, the frame pump running), its toast
    keeps off its block; once data flows again the toast is gone within 2 s."""
    window = fleet_window(qtbot, QSize(1366, 768))
    covered = {target for target, _ in under_the_first_corner(window)}
    quiet = next(t for t in NODES if t in covered)
    session = window.session
    # No daemons: nothing to ask for silences (that needs the network thread started).
    session.pump.fleetChanged.disconnect(window.alerts.silence_listings.on_fleet_changed)
    session.pump.start()
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # the others keep sending; the quiet one does not
            for target in NODES:
                if target != quiet:
                    session.fleet.apply_all([samples(target, time.time(), GPUS, {})])
            qtbot.wait(200)
            toast = window.alerts.toast
            if toast.isVisible() and toast.alert is not None and is_local(toast.alert):
                break
        toast = window.alerts.toast
        assert toast.isVisible() and toast.alert is not None and toast.alert.target == quiet
        assert toast.alert.severity is Severity.CRITICAL and toast.alert.gpu_index is None
        blocks = tile_rects(window, quiet, None)
        assert blocks and not any(toast.geometry().intersects(b) for b in blocks), (
            toast.geometry(), blocks,
        )  # fmt: skip
        answered = time.monotonic()
        session.fleet.apply_all([samples(quiet, time.time(), GPUS, {})])  # it answers again
        qtbot.waitUntil(lambda: not window.alerts.toast.isVisible(), timeout=2000)
        gone_s = time.monotonic() - answered
        assert gone_s < 2.0
        print(f"toast gone {gone_s * 1000:.0f} ms after the node answered again")
    finally:
        session.pump.stop()
