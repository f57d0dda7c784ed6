"""A Qt test's windows are gone before the next test starts (tests/conftest.py,
qt_garbage_in_the_gui_thread): a worker that kept every earlier test's windows had every
application-wide restyle polish them all, and died of a segfault there twice."""

from __future__ import annotations

from PySide6.QtWidgets import QApplication

from console.main_window import MainWindow
from console.session import ConsoleSession


def _windows() -> list[MainWindow]:
    return [w for w in QApplication.allWidgets() if isinstance(w, MainWindow)]


def test_a_console_window_the_test_leaves_behind(qtbot, start_window) -> None:  # type: ignore[no-untyped-def]
    window: MainWindow = start_window(ConsoleSession([]), size=(800, 600))
    assert window in _windows() and len(QApplication.allWidgets()) > 100


def test_is_gone_when_the_next_test_starts(qtbot) -> None:  # type: ignore[no-untyped-def]
    assert _windows() == []  # (this file's tests run in order, on one worker)
