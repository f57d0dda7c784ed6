"""EventLog: the journal events the console has seen, newest first."""

from __future__ import annotations

from PySide6.QtWidgets import QHeaderView, QTableView, QWidget

from console.qt.event_model import EventLogModel


class EventLog(QTableView):
    def __init__(self, model: EventLogModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("eventLog")
        self.setModel(model)
        self.verticalHeader().hide()
        header = self.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(False)
        header.setSectionResizeMode(4, QHeaderView.ResizeMode.Stretch)
