"""PeopleListModel: users and teams to reserve GPUs for; each row can be dragged onto tiles."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from PySide6.QtCore import QAbstractListModel, QMimeData, QModelIndex, QPersistentModelIndex, Qt

from console.fleet.model import Change, FleetModel
from console.fleet.node_looks import NodeLooks
from console.fleet.people import Person, known_people, process_users
from console.qt.mime import HOLDER_MIME, holder_mime

Index = QModelIndex | QPersistentModelIndex
PERSON_ROLE = int(Qt.ItemDataRole.UserRole) + 1
# Process users are looked for at most this often (a fleet changes every frame).
REFRESH_S = 1.0


class PeopleListModel(QAbstractListModel):
    def __init__(self, fleet: FleetModel, configured: Sequence[str] = ()) -> None:
        super().__init__()
        self._fleet = fleet
        self._configured = tuple(configured)
        self._rows: list[Person] = []
        self._refreshed = (-1, 0.0)  # (control version, monotonic time) of the last look
        # Each node's process users, looked at again as the node changes: a frame's
        # nodes, not the whole fleet's processes at once.
        self._users = NodeLooks(fleet, process_users)
        self.refresh()

    def refresh(self) -> None:
        people = known_people(self._configured, self._fleet, self._users.by_node)
        if people == self._rows:
            return  # most frames change nobody: keep the view's selection and scroll
        self.beginResetModel()
        self._rows = people
        self.endResetModel()

    def on_fleet_changed(self, changes: dict[str, Change]) -> None:
        self._users.follow(changes)
        version, now = self._fleet.control.version, time.monotonic()
        if version != self._refreshed[0] or now - self._refreshed[1] >= REFRESH_S:
            self._refreshed = (version, now)
            self.refresh()

    def person(self, row: int) -> Person:
        return self._rows[row]

    def row_of(self, name: str) -> int | None:
        return next((i for i, p in enumerate(self._rows) if p.name == name), None)

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._rows)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        person = self._rows[index.row()]
        if role == Qt.ItemDataRole.DisplayRole:
            return person.name
        if role == PERSON_ROLE:
            return person
        if role == Qt.ItemDataRole.ToolTipRole:
            kind = "team" if person.team else "user"
            return f"{kind}, seen in {', '.join(person.sources)}"
        return None

    def flags(self, index: Index) -> Qt.ItemFlag:
        return super().flags(index) | Qt.ItemFlag.ItemIsDragEnabled

    def mimeTypes(self) -> list[str]:
        return [HOLDER_MIME]

    def mimeData(self, indexes: Sequence[QModelIndex]) -> QMimeData:
        valid = [i for i in indexes if i.isValid()]
        return holder_mime(self._rows[valid[0].row()].name) if valid else QMimeData()

    def supportedDragActions(self) -> Qt.DropAction:
        return Qt.DropAction.CopyAction
