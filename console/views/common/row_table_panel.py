"""How the console's row tables look and sit: one place for every panel of them.

The alert, silence, workload and inventory panels are each a bar of controls
over a table of rows; they differ in their models and actions, not in this.
"""

from __future__ import annotations

from collections.abc import Iterable

from PySide6.QtCore import QAbstractItemModel, QSortFilterProxyModel
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QHBoxLayout,
    QHeaderView,
    QLineEdit,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from console.qt.row_table import EndedRowsProxy

# A column fitted to its contents reads the rows in view and at most this many more:
# Qt's default (1,000) made fitting the inventory's 1,000 GPUs half a second's freeze
# (bench/inventory_churn.py); with 30 it costs about what fitting the rows in view does.
FIT_ROWS = 30


def set_up_row_table(table: QTableView) -> None:
    """Whole rows selected, no row numbers, columns resizable with the last one stretching."""
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.verticalHeader().hide()
    table.horizontalHeader().setResizeContentsPrecision(FIT_ROWS)
    table.horizontalHeader().setStretchLastSection(True)
    table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)


def bar_over_table(
    panel: QWidget, bar: Iterable[QWidget | tuple[QWidget, int]], table: QWidget
) -> QVBoxLayout:
    """Lay out `panel`: the bar's widgets (a pair gives a stretch factor) above `table`."""
    row = QHBoxLayout()
    for item in bar:
        widget, stretch = item if isinstance(item, tuple) else (item, 0)
        row.addWidget(widget, stretch)
    layout = QVBoxLayout(panel)
    layout.setContentsMargins(4, 4, 4, 4)
    layout.addLayout(row)
    layout.addWidget(table)
    return layout


class RowPanel(QWidget):
    """A panel over one model's rows, seen through a proxy that filters and sorts them.

    Every row panel (alerts, silences, workloads, reservations, people, inventory,
    usage, audit) is named for the stylesheet and the saved layout, holds its model
    and shows it through its own proxy; the panel adds its bar and its actions.
    """

    # Why our role allows none of the panel's actions ("" when it allows them).
    action_refusal = ""

    def __init__(self, name: str, model: QAbstractItemModel, proxy: QSortFilterProxyModel,
                 parent: QWidget | None) -> None:  # fmt: skip
        super().__init__(parent)
        self.setObjectName(name)
        self.proxy = proxy
        proxy.setSourceModel(model)

    def _filtered_rows(
        self, table: QTableView, name: str, placeholder: str, show_ended: str
    ) -> tuple[QLineEdit, QCheckBox]:
        """`table`, named `name`, shows the proxy's rows as a row table: those holding the
        text typed in the filter line (which shows `placeholder`), the ended ones too while
        the check box (`show_ended`: "Show cleared") is checked. Each change of the
        selected rows calls `_on_selection_changed`. Returns the line and the box."""
        table.setObjectName(name)
        table.setModel(self.proxy)
        set_up_row_table(table)
        text, ended = QLineEdit(placeholderText=placeholder), QCheckBox(show_ended)
        text.textChanged.connect(self.proxy.setFilterFixedString)
        assert isinstance(self.proxy, EndedRowsProxy)
        ended.toggled.connect(self.proxy.set_show_ended)
        table.selectionModel().selectionChanged.connect(self._on_selection_changed)
        return text, ended

    def set_action_refusal(self, refusal: str) -> None:
        """Offer the panel's actions only where our role allows them; say why not."""
        self.action_refusal = refusal
        self._show_refusal(refusal)
        self._on_selection_changed()

    def _show_refusal(self, refusal: str) -> None:
        """Say on the actions why our role does not allow them ("": it does)."""

    def _on_selection_changed(self, *_args: object) -> None:
        """Offer the actions that the selected rows allow."""
