"""ProcessTable: the GPU detail's process table (nvitop's columns), sortable, draggable.

A row drags onto the kill zone with the compact label (console.views.common.drag_image);
its context menu is the detail panel's (Kill…).
"""

from __future__ import annotations

from PySide6.QtCore import QSortFilterProxyModel, Qt
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QWidget

from console.qt.process_model import ProcessTableModel
from console.qt.row_table import SortKeyProxy
from console.views.common.drag_image import CompactDragTable

MAX_HEIGHT = 120


class ProcessTable(CompactDragTable):
    def __init__(self, model: ProcessTableModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("processTable")
        self.source = model
        self.proxy: QSortFilterProxyModel = SortKeyProxy()
        self.proxy.setSourceModel(model)
        self.setModel(self.proxy)
        header = self.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(True)
        self.verticalHeader().hide()
        self.setMaximumHeight(MAX_HEIGHT)
        # The daemon's order until a header is clicked (-1: no column sorts yet).
        header.setSortIndicator(-1, Qt.SortOrder.AscendingOrder)
        self.setSortingEnabled(True)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setDragEnabled(True)
        self.setDragDropMode(QAbstractItemView.DragDropMode.DragOnly)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.setWordWrap(False)
        # Fitted to the processes shown when they change (a few rows: cheap), so PID to
        # elapsed fit beside each other and the command takes the rest.
        model.modelReset.connect(self.resizeColumnsToContents)

    def source_row(self, view_row: int) -> int:
        """The model's row shown at `view_row` (the table may be sorted)."""
        return self.proxy.mapToSource(self.proxy.index(view_row, 0)).row()
