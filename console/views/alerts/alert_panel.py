"""AlertPanel: the fleet's alerts, sortable and filterable, with acknowledge and silence."""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, Qt, Signal
from PySide6.QtWidgets import (
    QMenu,
    QPushButton,
    QTableView,
    QWidget,
)

from console.fleet.alert_rows import AlertRow
from console.qt.alert_model import ALERT_ROLE, AlertFilterProxy, AlertTableModel
from console.views.alerts.alert_menu import alert_row_menu
from console.views.common.keyboard_menus import offer_row_menus
from console.views.common.row_table_panel import RowPanel, bar_over_table

COLUMN_PX = 72


class AlertPanel(RowPanel):
    """Views and asks; the actions themselves go to the daemon through signals."""

    acknowledgeRequested = Signal(object)  # AlertRow
    silenceRequested = Signal(object)  # AlertRow
    gpuRequested = Signal(str, int)  # target, GPU index

    def __init__(self, model: AlertTableModel, parent: QWidget | None = None) -> None:
        super().__init__("alertPanel", model, AlertFilterProxy(), parent)
        self.proxy: AlertFilterProxy
        self.model = model
        self.table = QTableView()
        self.filter, self.show_cleared = self._filtered_rows(
            self.table, "alertTable", "Filter: node, rule, GPU, text…", "Show cleared"
        )
        self.acknowledge = QPushButton("Acknowledge")
        self.silence = QPushButton("Silence…")
        self._build()
        self._wire()
        self._on_selection_changed()

    def _build(self) -> None:
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(0, Qt.SortOrder.DescendingOrder)
        # Narrow until the first alerts come: nine columns of 100 px wanted a horizontal
        # scroll bar on a 1366x768 screen; then fitted to them, once (a person's widths stay).
        self.table.horizontalHeader().setDefaultSectionSize(COLUMN_PX)
        self._fitted = False
        bar_over_table(self, (self.filter, self.show_cleared, self.acknowledge, self.silence),
                       self.table)  # fmt: skip

    def _wire(self) -> None:
        # Reset or updated in place: a selected alert may have been acknowledged or cleared.
        self.model.refreshed.connect(self._on_selection_changed)
        self.acknowledge.clicked.connect(self._on_acknowledge_clicked)
        self.silence.clicked.connect(self._on_silence_clicked)
        self.table.doubleClicked.connect(self._on_table_double_clicked)
        self.proxy.rowsInserted.connect(self._fit_columns_once)
        self.proxy.modelReset.connect(self._fit_columns_once)
        # A row's menu: right click, the Menu key or Shift+F10 (console/views/alerts/alert_menu.py).
        offer_row_menus(self.table, self._menu_at)

    def _fit_columns_once(self, *_rows: object) -> None:
        if self._fitted or self.proxy.rowCount() == 0:
            return
        self._fitted = True
        for column in range(self.proxy.columnCount() - 1):  # the summary stretches
            self.table.resizeColumnToContents(column)

    def selected_alerts(self) -> list[AlertRow]:
        rows = self.table.selectionModel().selectedRows()
        return [index.data(ALERT_ROLE) for index in rows]

    def _show_refusal(self, refusal: str) -> None:
        for button in (self.acknowledge, self.silence):
            button.setToolTip(refusal)

    def _on_selection_changed(self, *_args: object) -> None:
        firing = [a for a in self.selected_alerts() if a.firing] if not self.action_refusal else []
        self.acknowledge.setEnabled(any(not a.acknowledged for a in firing))
        self.silence.setEnabled(len(firing) == 1)

    def _on_acknowledge_clicked(self) -> None:
        for alert in self.selected_alerts():
            if alert.firing and not alert.acknowledged:
                self.acknowledgeRequested.emit(alert)

    def _on_silence_clicked(self) -> None:
        firing = [a for a in self.selected_alerts() if a.firing]
        if len(firing) == 1:
            self.silenceRequested.emit(firing[0])

    def row_menu(self, row: QModelIndex) -> QMenu:
        alert: AlertRow = row.data(ALERT_ROLE)
        return alert_row_menu(
            self, alert, row, self.action_refusal, self.acknowledgeRequested.emit,
            self.silenceRequested.emit, self.gpuRequested.emit,
        )  # fmt: skip

    def _menu_at(self, row: QModelIndex) -> QMenu:
        self.table.setCurrentIndex(row)
        return self.row_menu(row)

    def _on_table_double_clicked(self, index: QModelIndex) -> None:
        alert: AlertRow = index.data(ALERT_ROLE)
        if alert.gpu_index is not None:
            self.gpuRequested.emit(alert.target, alert.gpu_index)
