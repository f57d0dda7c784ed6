"""PeoplePanel: users and teams; drag one onto GPU tiles to reserve them."""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, QSortFilterProxyModel, Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QLabel,
    QLineEdit,
    QListView,
    QVBoxLayout,
    QWidget,
)

from console.qt.people_model import PeopleListModel

HINT = (
    "Drag a user or team onto a GPU tile to reserve it; Ctrl+click tiles first to "
    "reserve several. Add names in the console settings: people = [...]."
)


class PeoplePanel(QWidget):
    def __init__(self, model: PeopleListModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("peoplePanel")
        self.model = model
        self.proxy = QSortFilterProxyModel()
        self.proxy.setSourceModel(model)
        self.proxy.setFilterCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.filter = QLineEdit(placeholderText="Filter users and teams…")
        self.list = QListView()
        self.list.setObjectName("peopleList")
        self.list.setModel(self.proxy)
        self.list.setFlow(QListView.Flow.LeftToRight)
        self.list.setWrapping(True)
        self.list.setSpacing(4)
        self.list.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.list.setDragEnabled(True)
        self.list.setDragDropMode(QAbstractItemView.DragDropMode.DragOnly)
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
