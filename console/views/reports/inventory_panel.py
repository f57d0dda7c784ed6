"""InventoryPanel: every GPU's versions and serials, drift highlighted, exportable to CSV."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import (
    QLabel,
    QLineEdit,
    QPushButton,
    QTableView,
    QWidget,
)

from console.fleet.inventory import drift_summary, inventory_csv
from console.qt.inventory_model import InventoryFilterProxy, InventoryTableModel
from console.views.common.csv_export import ask_csv_path, write_csv
from console.views.common.row_table_panel import RowPanel, bar_over_table, set_up_row_table

# Rows that arrive in a burst (a fleet connecting) are fitted once, this long after the first.
FIT_DELAY_MS = 1000


class InventoryPanel(RowPanel):
    """Shows the inventory model; the export reports through `message`, never a dialog."""

    message = Signal(str)  # for the status bar: export done, or why it failed

    def __init__(self, model: InventoryTableModel, parent: QWidget | None = None) -> None:
        super().__init__("inventoryPanel", model, InventoryFilterProxy(), parent)
        self.proxy: InventoryFilterProxy
        self.model = model
        self.proxy.setParent(self)  # its C++ side goes with the panel's
        self.filter = QLineEdit(placeholderText="Filter: node, model, serial, version…")
        self.summary = QLabel()
        self.export = QPushButton("Export CSV…")
        self.table = QTableView()
        # Asks where to save ("" when cancelled); tests replace it so no dialog opens.
        self.choose_path: Callable[[], str] = self._ask_path
        self._fit_due = True  # fitted when first shown
        self._fit_timer = QTimer(self)
        self._fit_timer.setObjectName("inventoryFitTimer")
        self._fit_timer.setSingleShot(True)
        self._fit_timer.setInterval(FIT_DELAY_MS)
        self._fit_timer.timeout.connect(self._fit_columns)
        self._build()
        self._wire()
        self._on_model_contents_changed()

    def _build(self) -> None:
        self.filter.setObjectName("inventoryFilter")
        self.summary.setObjectName("inventoryDrift")
        self.export.setObjectName("inventoryExport")
        self.table.setObjectName("inventoryTable")
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(0, Qt.SortOrder.AscendingOrder)
        set_up_row_table(self.table)
        bar_over_table(self, ((self.filter, 1), self.summary, self.export), self.table)

    def _wire(self) -> None:
        self.filter.textChanged.connect(self.proxy.setFilterFixedString)
        self.model.contentsChanged.connect(self._on_model_contents_changed)
        # New rows may hold longer texts: fit the columns again, a second after the first
        # of a burst (nodes join over seconds) and only where it shows; changed cells
        # keep the widths.
        self.model.modelReset.connect(self._fit_later)
        self.model.rowsInserted.connect(self._fit_later)
        self.export.clicked.connect(self._on_export_clicked)

    def _on_model_contents_changed(self) -> None:
        count = self.model.drift_count()
        self.summary.setText(drift_summary(count))
        if self.summary.property("drift") != (count > 0):
            # The theme can style a label with drift: QLabel#inventoryDrift[drift="true"].
            self.summary.setProperty("drift", count > 0)
            self.summary.style().unpolish(self.summary)
            self.summary.style().polish(self.summary)
        self.export.setEnabled(self.model.rowCount() > 0)

    def _fit_later(self) -> None:
        self._fit_due = True
        if self.isVisible() and not self._fit_timer.isActive():
            self._fit_timer.start()

    def _fit_columns(self) -> None:
        if self._fit_due and self.isVisible():
            self._fit_due = False
            self.table.resizeColumnsToContents()

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self._fit_columns()

    def _on_export_clicked(self) -> None:
        path = self.choose_path()
        if path:
            self.export_to(Path(path))

    def export_to(self, path: Path) -> bool:
        """Write every GPU (not just the filtered rows) to `path`; say how it went."""
        rows = self.model.rows()
        error = write_csv(path, inventory_csv(rows))
        if error is not None:
            self.message.emit(f"Could not export the inventory: {error}")
            return False
        self.message.emit(f"Exported the inventory of {len(rows)} GPUs to {path}")
        return True

    def _ask_path(self) -> str:
        return ask_csv_path(self, "Export inventory", "inventory")
