"""No test inherits the keys an earlier one left held (conftest's no_modifier_held_after).

The two tests run in this order (one file: one worker, in order). The first shows what
Qt does: after QTest's Ctrl+click it believes Ctrl is still held. The second, the next
test in the same process, starts with no key held: the fixture told Qt they are up.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QPushButton


def test_a_ctrl_click_leaves_qt_believing_ctrl_is_held(qtbot) -> None:  # type: ignore[no-untyped-def]
    button = QPushButton("x")
    qtbot.addWidget(button)
    button.show()
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.ControlModifier)
    assert QApplication.keyboardModifiers() == Qt.KeyboardModifier.ControlModifier


def test_the_next_test_starts_with_no_key_held(qtbot) -> None:  # type: ignore[no-untyped-def]
    assert QApplication.keyboardModifiers() == Qt.KeyboardModifier.NoModifier
