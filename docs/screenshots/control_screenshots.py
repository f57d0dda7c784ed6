"""Render the screenshots of docs/control.md offscreen, against demo daemons.

    .venv/bin/python docs/screenshots/control_screenshots.py [OUT_DIR]

Starts the demo's four nodes (console/demo_fleet.py: its users' workloads and
reservations), reserves a GPU for bob and queues a 2-GPU workload of alice's on
gpu-node-03, then replays a drag over the tiles (the same event objects the
tests use) and opens the kill confirmation for the demo's llama-pretrain. Writes control-drag.png,
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
from shot_tools import Started, TokenStub, save_image, settle, shoot_in_use, wait_until

from console.main_window import MainWindow
from console.views.grid.fleet_grid import FleetGrid
from gpufleet.v1 import node_pb2 as pb

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


def stage(stubs: list[TokenStub]) -> Started:
    """On the demo's fleet in use: a reservation for bob and a queued 2-GPU workload of
    alice's on gpu-node-03 (the demo's nightly-benchmark and team:ml's sweep run there,
    GPUs 3 to 7 free). Returns what was started."""
    third = stubs[2]
    until = int((time.time() + 5 * 3600) * 1000)
    third.Reserve(pb.ReserveRequest(gpu_indices=[7], holder="bob", until_unix_ms=until,
                                    reason="benchmark run"), timeout=5)  # fmt: skip
    request = pb.SubmitWorkloadRequest(
        name="llama-8b-sft", argv=["sleep", "600"], owner="alice", gpu_count=2,
        min_free_memory_bytes=20 * 1024**3,
    )  # fmt: skip
    return [(third, third.SubmitWorkload(request, timeout=5).id)]


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    return shoot_in_use(stage, shoot, PEOPLE, (1600, 900))


def shoot(app: QApplication, window: MainWindow, targets: list[str]) -> None:
    fleet, first, third, fourth = window.session.fleet, targets[0], targets[2], targets[3]
    wait_until(app, lambda: any(w.name == "llama-8b-sft" for w in fleet.control.workloads())
               and fleet.control.running_on(first, 0) is not None)  # fmt: skip
    window.grid.select(first, 0)  # alice's llama-pretrain, the demo's
    table = window.detail.processes

    def pretrain_row() -> int | None:
        commands = [table.process(r).command or "" for r in range(table.rowCount())]
        return next((r for r, c in enumerate(commands) if c.endswith("llama-pretrain")), None)

    wait_until(app, lambda: pretrain_row() is not None)
    settle(app, 2)
    # A queued 2-GPU workload over a free GPU: it takes that one and the next free.
    window.tabs.setCurrentWidget(window.control.workload_panel)
    panel, grid = window.control.workload_panel, window.grid
    llama = next(w for w in fleet.control.workloads() if w.name == "llama-8b-sft")
    panel.select(llama.target, llama.id)
    mime = panel.proxy.mimeData([panel.row_index(llama.target, llama.id)])
    hover(grid, mime, tile_center(grid, third, 4))
    save(window.grab().toImage(), "control-drag.png")
    # ...and over a GPU reserved for someone else: refused, and why.
    hover(grid, mime, tile_center(grid, third, 7))
    save(window.grab().toImage(), "control-drag-refused.png")
    grid.dragLeaveEvent(QDragLeaveEvent())
    # A team onto two selected tiles.
    grid.select(fourth, 2)
    grid.select(fourth, 3, add=True)
    window.tabs.setCurrentWidget(window.control.people_panel)
    people = window.control.people_panel
    holder = people.proxy.mimeData([people.person_index("team:vision")])
    hover(grid, holder, tile_center(grid, fourth, 3))
    save(window.grab().toImage(), "control-reserve.png")
    grid.dragLeaveEvent(QDragLeaveEvent())
    # The kill confirmation for alice's llama-pretrain on gpu-node-01 GPU 0.
    grid.select(first, 0)
    window.tabs.setCurrentWidget(window.control.workload_panel)
    row = pretrain_row()
    assert row is not None
    window.detail.process_table.selectRow(row)
    window.detail.process_menu(row).actions()[0].trigger()
    dialog = window.control.prompts.dialog
    assert dialog is not None
    save_dialog(app, window, dialog, "control-kill.png")
    dialog.reject()


if __name__ == "__main__":
    sys.exit(main())
