"""PeoplePanel: users and teams; drag one onto GPU tiles to reserve them.

Or from the keyboard: a person's context menu (the Menu key, Shift+F10 or a
right click) reserves a GPU chosen in a list, or releases their reservations.
"""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, QSortFilterProxyModel, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QLabel,
    QLineEdit,
    QListView,
    QMenu,
    QVBoxLayout,
    QWidget,
)

from console.qt.people_model import PeopleListModel
from console.views.common.drag_image import CompactDragList
from console.views.common.keyboard_menus import offer_row_menus
from console.views.common.row_table_panel import RowPanel

HINT = (
    "Drag a user or team onto a GPU tile to reserve it; Ctrl+click tiles first to "
    "reserve several. From the keyboard: the Menu key on a name. "
    "Add names in the console settings: people = [...]."
)


class PeoplePanel(RowPanel):
    reserveRequested = Signal(str)  # holder: choose a GPU (the keyboard's drop)
    releaseRequested = Signal(str)  # holder: release their reservations (asked first)

    def __init__(self, model: PeopleListModel, parent: QWidget | None = None) -> None:
        super().__init__("peoplePanel", model, QSortFilterProxyModel(), parent)
        self.proxy: QSortFilterProxyModel
        self.model = model
        self.proxy.setFilterCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.filter = QLineEdit(placeholderText="Filter users and teams…")
        self.list = CompactDragList()  # a small drag label: the tiles stay in sight
        self.list.setObjectName("peopleList")
        self.list.setModel(self.proxy)
        self.list.setFlow(QListView.Flow.LeftToRight)
        self.list.setWrapping(True)
        self.list.setSpacing(4)
        self.list.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.list.setDragEnabled(True)
        self.list.setDragDropMode(QAbstractItemView.DragDropMode.DragOnly)
        offer_row_menus(self.list, lambda index: self.person_menu(str(index.data())))
        hint = QLabel(HINT)
        hint.setObjectName("dragHint")
        hint.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.filter)
        layout.addWidget(self.list)
        layout.addWidget(hint)
        self.filter.textChanged.connect(self.proxy.setFilterFixedString)

    def person_index(self, name: str) -> QModelIndex:
        """The view's index of a person (a drag source in tests), invalid if not shown."""
        row = self.model.row_of(name)
        source = self.model.index(row if row is not None else -1, 0)
        return self.proxy.mapFromSource(source)

    def person_menu(self, name: str) -> QMenu:
        """A person's menu: reserve a GPU for them, release what they hold."""
        menu = QMenu(self)
        menu.setObjectName("personMenu")
        reserve = menu.addAction(f"&Reserve a GPU for {name}…")
        reserve.triggered.connect(lambda: self.reserveRequested.emit(name))
        release = menu.addAction(f"Re&lease {name}'s reservations…")
        release.triggered.connect(lambda: self.releaseRequested.emit(name))
        return menu
