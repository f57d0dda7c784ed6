"""InventoryPanel: every GPU's versions and serials, drift highlighted, exportable to CSV."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import (
    QLabel,
    QLineEdit,
    QTableView,
    QWidget,
)

from console.fleet.inventory import drift_summary, inventory_csv
from console.qt.inventory_model import InventoryFilterProxy, InventoryTableModel
from console.qt.named_timer import named_timer
from console.views.common.csv_export import CsvExportPanel
from console.views.common.row_table_panel import bar_over_table, set_up_row_table

# Rows that arrive in a burst (a fleet connecting) are fitted once, this long after the first.
FIT_DELAY_MS = 1000


class InventoryPanel(CsvExportPanel):
    """Shows the inventory model; the export reports through `message`, never a dialog."""

    export_title, export_stem, export_subject = "Export inventory", "inventory", "the inventory"

    def __init__(self, model: InventoryTableModel, parent: QWidget | None = None) -> None:
        super().__init__("inventoryPanel", model, InventoryFilterProxy(), parent)
        self.proxy: InventoryFilterProxy
        self.model = model
        self.proxy.setParent(self)  # its C++ side goes with the panel's
        self.filter = QLineEdit(placeholderText="Filter: node, model, serial, version…")
        self.summary = QLabel()
        self.table = QTableView()
        self._fit_due = True  # fitted when first shown
        self._fit_timer = named_timer(
            self, "inventoryFitTimer", self._fit_columns, interval_ms=FIT_DELAY_MS, single_shot=True
        )
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

    def csv_export(self) -> tuple[str, str]:
        """Every GPU, not just the filtered rows."""
        rows = self.model.rows()
        return inventory_csv(rows), f"the inventory of {len(rows)} GPUs"
