"""Render the keyboard screenshots of docs/console.md offscreen, against demo daemons.

    PYTHONPATH=. .venv/bin/python docs/screenshots/keyboard_screenshots.py [OUT_DIR]

The demo's four nodes (console/demo_fleet.py: its users' running and queued workloads,
its reservations). Keys as a person
presses them (QTest on the real window): Ctrl+G, arrows to a tile (its focus
ring), the Menu key (the tile's menu, drawn where it pops up), a workload row's
Assign to GPU… chooser, and F1's list. Writes keyboard-grid.png,
keyboard-assign.png and keyboard-shortcuts.png.
"""

from __future__ import annotations

import sys

from control_screenshots import PEOPLE, save, save_dialog, settle
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QImage, QPainter
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QMenu, QWidget
from shot_tools import Started, TokenStub, shoot_in_use, wait_until

from console.main_window import MainWindow

Key = Qt.Key
FINETUNE = "finetune-70b"  # carol's, queued on gpu-node-01 by the demo (console/demo_seed.py)


def press(key: Key, modifier: Qt.KeyboardModifier = Qt.KeyboardModifier.NoModifier) -> None:
    target = QApplication.activePopupWidget() or QApplication.focusWidget()
    assert target is not None, "nothing has the keyboard focus"
    QTest.keyClick(target, key, modifier)


def stage(_stubs: list[TokenStub]) -> Started:
    """Nothing more than the demo's own: its running and queued workloads, its reservations."""
    return []


def with_popup(window: MainWindow, popup: QWidget) -> QImage:
    """The window with a popup menu drawn where it opened (a grab leaves popups out)."""
    base = window.grab().toImage()
    painter = QPainter(base)
    at = popup.mapToGlobal(QPoint(0, 0)) - window.mapToGlobal(QPoint(0, 0))
    painter.drawImage(at * base.devicePixelRatio(), popup.grab().toImage())
    painter.end()
    return base


def main() -> int:
    return shoot_in_use(stage, shoot, PEOPLE)


def shoot(app: QApplication, window: MainWindow, targets: list[str]) -> None:
    fleet, grid = window.session.fleet, window.grid
    wait_until(app, lambda: any(w.name == FINETUNE for w in fleet.control.workloads()))
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
    # The Workloads tab (Ctrl+3), the demo's queued 4-GPU finetune row, Menu, Assign to GPU…
    press(Key.Key_3, Qt.KeyboardModifier.ControlModifier)
    panel = window.control.workload_panel
    queued = next(w for w in fleet.control.workloads() if w.name == FINETUNE)
    panel.select(queued.target, queued.id)
    panel.row_menu(queued).actions()[1].trigger()  # what the Menu key and A open
    chooser = window.control.place_prompts.dialog
    assert chooser is not None
    wait_until(app, lambda: chooser.isAncestorOf(QApplication.focusWidget()), 10)
    QTest.keyClicks(QApplication.focusWidget(), "gpu 5")
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
