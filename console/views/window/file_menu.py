"""The window's File menu: Quit.

Quit closes the window as its close button does (the session stops, the layout is
saved, the console ends). Its key is Ctrl+Q (Cmd+Q on macOS, where Qt's Ctrl is
Cmd), with whatever else the platform names for quitting.
"""

from __future__ import annotations

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMainWindow, QMenu

QUIT_KEY = "Ctrl+Q"


def quit_keys() -> list[QKeySequence]:
    """Ctrl+Q first, then the platform's own quit keys (none twice)."""
    keys = [QKeySequence(QUIT_KEY)]
    for key in QKeySequence.keyBindings(QKeySequence.StandardKey.Quit):
        if not key.isEmpty() and key not in keys:
            keys.append(key)
    return keys


class FileMenu:
    """Builds the File menu, first on the window's menu bar."""

    def __init__(self, window: QMainWindow) -> None:
        self.menu = QMenu("&File", window)
        self.menu.setObjectName("fileMenu")
        self.quit = QAction("&Quit", window)
        self.quit.setObjectName("quitAction")
        self.quit.setShortcuts(quit_keys())
        self.quit.setMenuRole(QAction.MenuRole.QuitRole)
        self.quit.setStatusTip("Close the console (as closing its window)")
        # The window's shortcut even while the menu bar is hidden or unfocused.
        window.addAction(self.quit)
        self.quit.triggered.connect(window.close)
        self.menu.addAction(self.quit)
        bar = window.menuBar()
        if bar.actions():
            bar.insertMenu(bar.actions()[0], self.menu)  # File comes first
        else:
            bar.addMenu(self.menu)
