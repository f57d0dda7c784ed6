"""A drag image that leaves its target in sight; toasts that cover no table rows.

Real widgets in the real window.
"""

from __future__ import annotations

import dataclasses

import pytest
from PySide6.QtCore import QPoint, QRect, QSize
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QAbstractItemView, QApplication, QWidget

from console.fleet.model import FleetModel
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
