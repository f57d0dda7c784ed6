"""Render the keyboard screenshots of docs/console.md offscreen, against demo daemons.

    PYTHONPATH=. .venv/bin/python docs/screenshots/keyboard_screenshots.py [OUT_DIR]

(As root: the workloads run as their owners, the tests' local accounts.)

Two simulated GPU servers in use (reservations, a running and queued workloads). Keys as a person
presses them (QTest on the real window): Ctrl+G, arrows to a tile (its focus
ring), the Menu key (the tile's menu, drawn where it pops up), a workload row's
Assign to GPU… chooser, and F1's list. Writes keyboard-grid.png,
keyboard-assign.png and keyboard-shortcuts.png; every workload it started is
cancelled before the daemons stop.
"""

from __future__ import annotations

import sys
import time

from control_screenshots import PEOPLE, save, save_dialog, settle
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QImage, QPainter
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QMenu, QWidget
from shot_tools import Started, shoot_in_use, wait_until

from console.main_window import MainWindow
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from tests.accounts import TEST_ACCOUNTS, local_accounts

Key = Qt.Key


def press(key: Key, modifier: Qt.KeyboardModifier = Qt.KeyboardModifier.NoModifier) -> None:
    target = QApplication.activePopupWidget() or QApplication.focusWidget()
    assert target is not None, "nothing has the keyboard focus"
    QTest.keyClick(target, key, modifier)


def stage(stubs: list[pb_grpc.NodeServiceStub]) -> Started:
    """Reserve GPUs, run one workload, queue three: a fleet in use. Returns what was queued."""
    first, second = stubs
    until = int((time.time() + 5 * 3600) * 1000)
    for gpus, holder, why in (([4, 5], "bob", "benchmark run"), ([7], "carol", "profiling")):
        first.Reserve(pb.ReserveRequest(gpu_indices=gpus, holder=holder, until_unix_ms=until,
                                        reason=why, actor=holder), timeout=5)  # fmt: skip
    started = []
    for stub, name, owner, gpus in ((first, "train-resnet", "bob", 1),
                                    (first, "llama-8b-sft", "alice", 2),
                                    (second, "eval-nightly", "carol", 1),
                                    (second, "ablation", "alice", 1)):  # fmt: skip
        request = pb.SubmitWorkloadRequest(name=name, argv=["sleep", "600"], owner=owner,
                                           gpu_count=gpus, actor=owner)  # fmt: skip
        started.append((stub, stub.SubmitWorkload(request, timeout=5).id))
    assign = pb.AssignWorkloadRequest(workload_id=started[0][1], gpu_indices=[1], actor="bob")
    first.AssignWorkload(assign, timeout=5)
    return started


def with_popup(window: MainWindow, popup: QWidget) -> QImage:
    """The window with a popup menu drawn where it opened (a grab leaves popups out)."""
    base = window.grab().toImage()
    painter = QPainter(base)
    at = popup.mapToGlobal(QPoint(0, 0)) - window.mapToGlobal(QPoint(0, 0))
    painter.drawImage(at * base.devicePixelRatio(), popup.grab().toImage())
    painter.end()
    return base


def main() -> int:
    # Workloads run as their owners: the tests' local accounts (created as root, removed after).
    with local_accounts(TEST_ACCOUNTS):
        return shoot_in_use(stage, shoot, PEOPLE)


def shoot(app: QApplication, window: MainWindow, targets: list[str]) -> None:
    fleet, grid = window.session.fleet, window.grid
    wait_until(app, lambda: len(fleet.control.workloads()) == 4)
    window.activateWindow()
    wait_until(app, lambda: QApplication.activeWindow() is window, 10)
    settle(app, 2)
    # Ctrl+G, then to gpu-node-01 GPU 2 and Enter; Down to the row below (GPU 6).
    press(Key.Key_G, Qt.KeyboardModifier.ControlModifier)
    wait_until(app, grid.hasFocus, 10)
    press(Key.Key_Home)
    for key in (Key.Key_Right, Key.Key_Right, Key.Key_Return, Key.Key_Down):
        press(key)
    settle(app, 0.5)
    press(Key.Key_Menu)
    wait_until(app, lambda: isinstance(QApplication.activePopupWidget(), QMenu), 10)
    menu = QApplication.activePopupWidget()
    assert menu is not None
    settle(app, 0.3)
    save(with_popup(window, menu), "keyboard-grid.png")
    press(Key.Key_Escape)
    # The Workloads tab (Ctrl+3), the 2-GPU llama row, Menu, Assign to GPU…
    press(Key.Key_3, Qt.KeyboardModifier.ControlModifier)
    panel = window.control.workload_panel
    llama = next(w for w in fleet.control.workloads() if w.name == "llama-8b-sft")
    panel.select(llama.target, llama.id)
    panel.row_menu(llama).actions()[1].trigger()  # what the Menu key and A open
    chooser = window.control.place_prompts.dialog
    assert chooser is not None
    wait_until(app, lambda: chooser.isAncestorOf(QApplication.focusWidget()), 10)
    QTest.keyClicks(QApplication.focusWidget(), "gpu 2")
    save_dialog(app, window, chooser, "keyboard-assign.png")
    chooser.reject()
    window.activateWindow()
    wait_until(app, lambda: QApplication.focusWidget() is not None, 10)
    press(Key.Key_F1)
    shortcuts = window.keys.dialog
    assert shortcuts is not None
    save_dialog(app, window, shortcuts, "keyboard-shortcuts.png")
    shortcuts.reject()


if __name__ == "__main__":
    sys.exit(main())
