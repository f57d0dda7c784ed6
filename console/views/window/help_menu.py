"""The window's Help menu: the guided tour (again) and the list of keys (F1).

The tour itself is shown at a person's first start by console/app.py; once seen
to the end or skipped it is remembered (console/qt/ui_state.py) and comes back
only from here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from PySide6.QtWidgets import QMainWindow, QMenu

from console.qt import ui_state
from console.views.window.guided_tour import GuidedTour, Target
from console.views.window.tour_steps import STEPS


class HelpMenu:
    """Builds the Help menu, last on the window's menu bar, and owns the tour."""

    def __init__(
        self, window: QMainWindow, targets: Mapping[str, Target], shortcuts: Callable[[], None]
    ) -> None:
        self.tour = GuidedTour(window, STEPS, targets)
        self.tour.finished.connect(lambda _seen: ui_state.remember_tour_seen())
        self.menu = QMenu("&Help", window)
        self.menu.setObjectName("helpMenu")
        self.tour_action = self.menu.addAction("Guided &tour")
        self.tour_action.setObjectName("tourAction")
        self.tour_action.triggered.connect(self.tour.start)
        keys = self.menu.addAction("&Keyboard shortcuts (F1)")
        keys.triggered.connect(shortcuts)
        window.menuBar().addMenu(self.menu)

    def first_start(self) -> bool:
        """Start the tour where this person has not seen it; whether it started."""
        if ui_state.tour_seen():
            return False
        self.tour.start()
        return True
