"""The window's View menu: the theme (follow the desktop, dark, light) and wall mode."""

from __future__ import annotations

from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QMainWindow, QMenu

from console.views.window.looks import Looks
from console.views.window.wall_mode import SHORTCUT, WallMode

THEME_ENTRIES = (("auto", "Follow the &desktop"), ("dark", "&Dark"), ("light", "&Light"))


class ViewMenu:
    """Builds the menu on the window's menu bar and keeps its checks in step."""

    def __init__(self, window: QMainWindow, looks: Looks, wall: WallMode) -> None:
        self.menu = QMenu("&View", window)
        self.menu.setObjectName("viewMenu")
        themes = self.menu.addMenu("&Theme")
        themes.setObjectName("themeMenu")
        group = QActionGroup(window)
        self.theme_actions: dict[str, QAction] = {}
        for choice, text in THEME_ENTRIES:
            action = themes.addAction(text)
            action.setCheckable(True)
            action.setChecked(choice == looks.choice)
            action.triggered.connect(lambda _=False, c=choice: looks.pick(c))
            group.addAction(action)
            self.theme_actions[choice] = action
        self.menu.addSeparator()
        self.wall = self.menu.addAction("&Wall display (full screen, view only)")
        self.wall.setObjectName("wallAction")
        self.wall.setCheckable(True)
        self.wall.setShortcut(QKeySequence(SHORTCUT))
        # The window's shortcut even while the menu bar is hidden or unfocused.
        window.addAction(self.wall)
        self.wall.toggled.connect(wall.set_on)
        wall.toggled.connect(self.wall.setChecked)
        help_menu = window.findChild(QMenu, "helpMenu")  # Help stays last
        if help_menu is not None:
            window.menuBar().insertMenu(help_menu.menuAction(), self.menu)
        else:
            window.menuBar().addMenu(self.menu)
