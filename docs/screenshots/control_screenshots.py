"""Render the screenshots of docs/control.md offscreen, against demo daemons.

    .venv/bin/python docs/screenshots/control_screenshots.py [OUT_DIR]

Starts two simulated GPU servers, queues and runs a few workloads, reserves
GPUs for a team, then replays a drag over the tiles (the same event objects
the tests use) and opens the kill confirmation. Writes control-drag.png,
control-drag-refused.png, control-reserve.png and control-kill.png. Every
workload it started is cancelled before the daemons stop.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from PySide6.QtCore import QMimeData, QPoint, QRect, Qt
from PySide6.QtGui import (
    QColor,
    QDragEnterEvent,
    QDragLeaveEvent,
    QDragMoveEvent,
    QImage,
    QPainter,
)
from PySide6.QtWidgets import QApplication, QWidget
from shot_tools import Started, save_image, settle, shoot_in_use, wait_until

from console.main_window import MainWindow
from console.views.grid.fleet_grid import FleetGrid
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc

OUT = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent
PEOPLE = ["alice", "bob", "carol", "team:ml", "team:vision"]


def hover(widget: QWidget, mime: QMimeData, pos: QPoint) -> None:
    """A drag entering the widget and resting at `pos` (QDrag.exec cannot run offscreen)."""
    buttons, keys = Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier
    widget.dragEnterEvent(QDragEnterEvent(pos, Qt.DropAction.CopyAction, mime, buttons, keys))  # type: ignore[attr-defined]
    widget.dragMoveEvent(QDragMoveEvent(pos, Qt.DropAction.CopyAction, mime, buttons, keys))  # type: ignore[attr-defined]


def tile_center(grid: FleetGrid, target: str, gpu: int) -> QPoint:
    tile = grid.tile_rect(target, gpu)
    assert tile is not None, (target, gpu)
    return tile.center()


def save(image: QImage, name: str) -> None:
    save_image(image, OUT / name)


def save_dialog(app: QApplication, window: MainWindow, dialog: QWidget, name: str) -> None:
    """Save the window with `dialog` over it, once the dialog has had time to paint."""
    settle(app, 0.3)
    save(with_dialog(window, dialog), name)


def with_dialog(window: MainWindow, dialog: QWidget) -> QImage:
    """The window, dimmed, with the dialog and a plain title bar over its middle."""
    base = window.grab().toImage()
    shot = dialog.grab().toImage()
    title_h = 28
    painter = QPainter(base)
    painter.fillRect(base.rect(), QColor(0, 0, 0, 110))
    x = (base.width() - shot.width()) // 2
    y = (base.height() - shot.height()) // 3
    frame = QRect(x - 1, y - title_h - 1, shot.width() + 2, shot.height() + title_h + 2)
    painter.fillRect(frame, QColor("#4a5568"))
    painter.fillRect(QRect(x, y - title_h, shot.width(), title_h), QColor("#2d3748"))
    painter.setPen(QColor("#f7fafc"))
    painter.drawText(QRect(x + 10, y - title_h, shot.width() - 20, title_h),
                     int(Qt.AlignmentFlag.AlignVCenter), dialog.windowTitle())  # fmt: skip
    painter.drawImage(QPoint(x, y), shot)
    painter.end()
    return base


def stage(stubs: list[pb_grpc.NodeServiceStub]) -> Started:
    """Queue and run workloads, reserve GPUs: a fleet in use. Returns what was started."""
    started = []

    def submit(stub: pb_grpc.NodeServiceStub, name: str, owner: str, gpus: int = 1,
               memory_gib: int = 0) -> str:  # fmt: skip
        request = pb.SubmitWorkloadRequest(
            name=name, argv=["sleep", "600"], owner=owner, gpu_count=gpus, actor="admin",
            min_free_memory_bytes=memory_gib * 1024**3,
        )  # fmt: skip
        workload_id = stub.SubmitWorkload(request, timeout=5).id
        started.append((stub, workload_id))
        return workload_id

    first, second = stubs
    until = int((time.time() + 5 * 3600) * 1000)
    for gpus, holder, why in (([4, 5], "bob", "benchmark run"), ([6, 7], "team:ml", "fine-tune")):
        reserve = pb.ReserveRequest(gpu_indices=gpus, holder=holder, until_unix_ms=until,
                                    reason=why, actor="admin")  # fmt: skip
        first.Reserve(reserve, timeout=5)
    running = submit(first, "train-resnet", "bob")
    first.AssignWorkload(pb.AssignWorkloadRequest(workload_id=running, gpu_indices=[1]), timeout=5)
    submit(first, "llama-8b-sft", "alice", gpus=2, memory_gib=40)
    submit(second, "eval-nightly", "carol")
    submit(second, "vision-ablation", "team:vision")
    return started


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    return shoot_in_use(stage, shoot, PEOPLE, (1600, 900))


def shoot(app: QApplication, window: MainWindow, targets: list[str]) -> None:
    fleet, first, second = window.session.fleet, targets[0], targets[1]
    wait_until(app, lambda: len(fleet.control.workloads()) == 4
               and fleet.control.running_on(first, 1) is not None)  # fmt: skip
    window.grid.select(first, 1)
    table = window.detail.processes
    wait_until(app, lambda: any(table.process(r).command == "sleep 600"
                                for r in range(table.rowCount())))  # fmt: skip
    settle(app, 2)
    # A queued 2-GPU workload over a free GPU: it takes that one and the next free.
    window.tabs.setCurrentWidget(window.control.workload_panel)
    panel, grid = window.control.workload_panel, window.grid
    llama = next(w for w in fleet.control.workloads() if w.name == "llama-8b-sft")
    panel.select(llama.target, llama.id)
    mime = panel.proxy.mimeData([panel.row_index(llama.target, llama.id)])
    hover(grid, mime, tile_center(grid, first, 2))
    save(window.grab().toImage(), "control-drag.png")
    # ...and over a GPU reserved for someone else: refused, and why.
    hover(grid, mime, tile_center(grid, first, 4))
    save(window.grab().toImage(), "control-drag-refused.png")
    grid.dragLeaveEvent(QDragLeaveEvent())
    # A team onto two selected tiles.
    grid.select(second, 0)
    grid.select(second, 1, add=True)
    window.tabs.setCurrentWidget(window.control.people_panel)
    people = window.control.people_panel
    holder = people.proxy.mimeData([people.person_index("team:vision")])
    hover(grid, holder, tile_center(grid, second, 1))
    save(window.grab().toImage(), "control-reserve.png")
    grid.dragLeaveEvent(QDragLeaveEvent())
    # The kill confirmation for the sleeper on gpu-node-01 GPU 1.
    grid.select(first, 1)
    window.tabs.setCurrentWidget(window.control.workload_panel)
    row = next(r for r in range(table.rowCount()) if table.process(r).command == "sleep 600")
    window.detail.process_table.selectRow(row)
    window.detail.process_menu(row).actions()[0].trigger()
    dialog = window.control.prompts.dialog
    assert dialog is not None
    save_dialog(app, window, dialog, "control-kill.png")
    dialog.reject()


if __name__ == "__main__":
    sys.exit(main())
