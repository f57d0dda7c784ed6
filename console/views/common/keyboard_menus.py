"""The Menu key and Shift+F10 open an item view's context menu at its current row.

Qt turns the Menu key into a context-menu event only where the platform does
(xcb does, offscreen does not) and Shift+F10 nowhere on Linux, and it places a
keyboard menu in the middle of the view, not at the row the keyboard is on.
`open_menus_from_keyboard` makes both keys ask a view with a custom context menu
for the menu of its current row, at that row; `pop_up_menu` shows the menu, and
`offer_row_menus` wires both to a view whose rows each have a menu.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QEvent, QModelIndex, QObject, QPoint, Qt
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QAbstractItemView, QAbstractScrollArea, QMenu


def is_menu_key(event: QKeyEvent) -> bool:
    """The Menu key, or Shift+F10 (the CUA binding GTK and Windows share)."""
    shift = bool(event.modifiers() & Qt.KeyboardModifier.ShiftModifier)
    return event.key() == Qt.Key.Key_Menu or (event.key() == Qt.Key.Key_F10 and shift)


class _MenuKeys(QObject):
    def __init__(self, view: QAbstractItemView) -> None:
        super().__init__(view)
        self.setObjectName("gpufleet-menu-keys")
        self._view = view

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if (
            event.type() == QEvent.Type.KeyPress
            and isinstance(event, QKeyEvent)
            and is_menu_key(event)
        ):
            current = self._view.currentIndex()
            if current.isValid():
                # customContextMenuRequested takes the viewport's coordinates.
                self._view.customContextMenuRequested.emit(self._view.visualRect(current).center())
            return True  # taken: the platform must not open a second menu
        return super().eventFilter(watched, event)


def open_menus_from_keyboard(view: QAbstractItemView) -> None:
    """Let Menu and Shift+F10 open `view`'s custom context menu at its current row."""
    view.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
    view.installEventFilter(_MenuKeys(view))


def pop_up_menu(menu: QMenu, view: QAbstractScrollArea, pos: QPoint) -> None:
    """Show `menu` at `pos` of `view`'s viewport (where customContextMenuRequested says);
    it is deleted once closed, so menus opened again and again do not pile up."""
    menu.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    menu.popup(view.viewport().mapToGlobal(pos))


def offer_row_menus(view: QAbstractItemView, menu_at: Callable[[QModelIndex], QMenu]) -> None:
    """A right click, the Menu key or Shift+F10 on a row of `view` pops up `menu_at(row)`
    there (`menu_at` may select the row first); nowhere else a menu opens."""
    open_menus_from_keyboard(view)

    def on_menu_requested(pos: QPoint) -> None:
        index = view.indexAt(pos)
        if index.isValid():
            pop_up_menu(menu_at(index), view, pos)

    view.customContextMenuRequested.connect(on_menu_requested)
