"""InventoryPanel: every GPU's versions and serials, drift highlighted, exportable to CSV."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QLabel,
    QLineEdit,
    QPushButton,
    QTableView,
    QWidget,
)

from console.fleet.inventory import drift_summary, inventory_csv
from console.qt.inventory_model import InventoryFilterProxy, InventoryTableModel
from console.views.csv_export import ask_csv_path, write_csv
from console.views.row_table_panel import bar_over_table, set_up_row_table


class InventoryPanel(QWidget):
    """Shows the inventory model; the export reports through `message`, never a dialog."""

    message = Signal(str)  # for the status bar: export done, or why it failed

    def __init__(self, model: InventoryTableModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("inventoryPanel")
        self.model = model
        self.proxy = InventoryFilterProxy()
        self.proxy.setSourceModel(model)
        self.filter = QLineEdit(placeholderText="Filter: node, model, serial, version…")
        self.summary = QLabel()
        self.export = QPushButton("Export CSV…")
        self.table = QTableView()
        # Asks where to save ("" when cancelled); tests replace it so no dialog opens.
        self.choose_path: Callable[[], str] = self._ask_path
        self._build()
        self._wire()
        self._on_model_reset()

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
        self.model.modelReset.connect(self._on_model_reset)
        self.export.clicked.connect(self._on_export_clicked)

    def _on_model_reset(self) -> None:
        count = self.model.drift_count()
        self.summary.setText(drift_summary(count))
        # The theme can style a label with drift: QLabel#inventoryDrift[drift="true"].
        self.summary.setProperty("drift", count > 0)
        self.summary.style().unpolish(self.summary)
        self.summary.style().polish(self.summary)
        self.export.setEnabled(self.model.rowCount() > 0)
        self.table.resizeColumnsToContents()

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
