"""File, Quit (issue #33: there was no File/Quit menu): the first menu of the bar, its
key Ctrl+Q, and quitting is closing the window: the session stops, the layout is saved."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QApplication, QMenu

from console.qt import ui_state
from console.session import ConsoleSession
from console.views.window.file_menu import quit_keys
from console.views.window.shortcuts_dialog import shortcuts_html
from console.views.window.window_looks import WindowLooks


def test_file_quit_is_the_first_menu_with_ctrl_q(qtbot, start_window) -> None:  # type: ignore[no-untyped-def]
    window = start_window(ConsoleSession(["127.0.0.1:1"]))
    WindowLooks(window)  # adds View after it, as the console's start does
    menus = [a.menu() for a in window.menuBar().actions()]
    names = [m.objectName() for m in menus if isinstance(m, QMenu)]
    assert names == ["fileMenu", "viewMenu", "helpMenu"]  # Help last, as everywhere
    file_menu = menus[0]
    assert isinstance(file_menu, QMenu) and file_menu.title() == "&File"
    (quit_action,) = file_menu.actions()
    assert quit_action.text() == "&Quit"
    assert quit_action.shortcut() == QKeySequence("Ctrl+Q")
    assert quit_keys()[0] == QKeySequence("Ctrl+Q")
    assert "Ctrl+Q" in shortcuts_html()  # F1's list names it


def test_ctrl_q_closes_the_window_as_its_close_button_does(qtbot, start_window) -> None:  # type: ignore[no-untyped-def]
    session = ConsoleSession(["127.0.0.1:1"])
    window = start_window(session)
    looks = WindowLooks(window)
    qtbot.waitExposed(window)
    assert not looks.path.exists()
    assert session.connections._thread.is_alive()
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=3000)
    window.grid.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is window.grid, timeout=3000)
    # As a keyboard sends it: to the focus widget, through the window's shortcuts.
    qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_Q, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: not window.isVisible())
    assert looks.path.exists() and ui_state.load(looks.path).geometry  # the layout, saved
    assert not session.connections._thread.is_alive()  # the session stopped
    assert not session.pump._timer.isActive()
