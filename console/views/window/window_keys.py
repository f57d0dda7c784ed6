"""WindowKeys: the main window's own shortcuts, exactly those WINDOW_KEYS lists.

F1 or ? shows every shortcut; Ctrl+G goes to the grid, Ctrl+F to the search box,
Ctrl+P to the selected GPU's processes, Ctrl+1 … Ctrl+8 to a bottom tab's table;
Ctrl+M mutes.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QAction, QKeySequence, QShortcut
from PySide6.QtWidgets import QAbstractItemView, QTabWidget, QWidget

from console.views.common.scroll_into_view import scroll_into_view
from console.views.window.shortcuts_dialog import WINDOW_KEYS, ShortcutsDialog


class WindowKeys(QObject):
    def __init__(
        self,
        window: QWidget,
        grid: QWidget,
        tabs: QTabWidget,
        processes: QAbstractItemView,
        mute: QAction,
        search: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(window)
        self.setObjectName("windowKeys")
        self._window, self._tabs, self._processes = window, tabs, processes
        self.dialog: ShortcutsDialog | None = None  # the list, while it is open
        # Rows are selected whole, so Tab from cell to cell is no use: let it leave the
        # table for the panel's buttons (Qt's tables keep Tab to themselves by default).
        for view in [*tabs.findChildren(QAbstractItemView), processes]:
            view.setTabKeyNavigation(False)
        slots = {
            "shortcuts": self.show_shortcuts,
            "grid": grid.setFocus,
            "processes": self._focus_processes,
            "mute": mute.toggle,
        }
        if search is not None:
            slots["search"] = search
        for name, slot in slots.items():
            for keys in WINDOW_KEYS[name]:
                QShortcut(QKeySequence(keys), window, slot)
        for index, keys in enumerate(WINDOW_KEYS["tabs"]):
            QShortcut(QKeySequence(keys), window, lambda i=index: self._focus_tab(i))

    def show_shortcuts(self) -> None:
        if self.dialog is not None:
            self.dialog.raise_()
            return
        dialog = ShortcutsDialog(self._window)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.finished.connect(self._on_dialog_finished)
        self.dialog = dialog
        dialog.open()

    def _on_dialog_finished(self, _result: int) -> None:
        self.dialog = None

    def _focus_tab(self, index: int) -> None:
        page = self._tabs.widget(index)
        if page is None or not self._tabs.isTabVisible(index):
            return  # the Audit tab, for a non-admin
        self._tabs.setCurrentIndex(index)
        views = [v for v in page.findChildren(QAbstractItemView) if v.isVisibleTo(page)]
        if views:
            _focus_rows(views[0])
        else:
            page.setFocus()

    def _focus_processes(self) -> None:
        _focus_rows(self._processes)
        scroll_into_view(self._processes)  # the detail scrolls: the table may be below it


def _focus_rows(view: QAbstractItemView) -> None:
    """Focus a table on a selected row: with none selected, the current (or first) one.

    A view focused without a selection has a current row that is not selected (Qt's
    focus-in makes one current only), so the row's menu and buttons would act on nothing.
    """
    view.setFocus()
    model, selection = view.model(), view.selectionModel()
    if model is None or model.rowCount() == 0 or selection is None or selection.hasSelection():
        return
    current = view.currentIndex()
    view.setCurrentIndex(current if current.isValid() else model.index(0, 0))
