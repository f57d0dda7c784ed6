"""SilencePanel: the fleet's silences (pending, active, lately expired), new and expire."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QPushButton,
    QTableView,
    QWidget,
)

from console.fleet.silences import SilenceGroup
from console.qt.silence_model import ENDS, SILENCE_ROLE, SilenceFilterProxy, SilenceTableModel
from console.views.common.row_table_panel import RowPanel, bar_over_table


class SilencePanel(RowPanel):
    """Views and asks; the prompts open the dialogs and send."""

    newRequested = Signal()
    expireRequested = Signal(object)  # SilenceGroup

    def __init__(self, model: SilenceTableModel, parent: QWidget | None = None) -> None:
        super().__init__("silencePanel", model, SilenceFilterProxy(model.now), parent)
        self.proxy: SilenceFilterProxy
        self.model = model
        if model.parent() is None:  # a model nobody owns lives (and ticks) as long as its view
            model.setParent(self)
        self.table = QTableView()
        self.filter, self.show_expired = self._filtered_rows(
            self.table, "silenceTable", "Filter: matcher, node, author, comment…", "Show expired"
        )
        self.new = QPushButton("New silence…")
        self.expire = QPushButton("Expire…")
        self._build()
        self._wire()
        self.set_action_refusal("")

    def _build(self) -> None:
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(ENDS, Qt.SortOrder.AscendingOrder)  # ending soonest first
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        bar_over_table(self, (self.filter, self.show_expired, self.new, self.expire), self.table)

    def _wire(self) -> None:
        self.model.modelReset.connect(self._on_selection_changed)
        self.model.modelReset.connect(self._on_model_reset)
        self.new.clicked.connect(self.newRequested)
        self.expire.clicked.connect(self._on_expire_clicked)

    def _on_model_reset(self) -> None:
        # Fit every column but the last, which stretches to the table's edge.
        for column in range(self.model.columnCount() - 1):
            self.table.resizeColumnToContents(column)

    def selected(self) -> SilenceGroup | None:
        rows = self.table.selectionModel().selectedRows()
        return rows[0].data(SILENCE_ROLE) if rows else None

    def _show_refusal(self, refusal: str) -> None:
        # Viewers see silences; new and expire only where our role allows them.
        self.new.setEnabled(not refusal)
        self.new.setToolTip(refusal or "Silence alerts by node, rule, GPU or severity")

    def _on_selection_changed(self, *_args: object) -> None:
        group = self.selected()
        now = self.model.now()
        expirable = group is not None and bool(group.unexpired(now))
        self.expire.setEnabled(expirable and not self.action_refusal)
        self.expire.setToolTip(self.action_refusal or "End the selected silence now")

    def _on_expire_clicked(self) -> None:
        group = self.selected()
        if group is not None:
            self.expireRequested.emit(group)
