"""How the console's row tables look and sit: one place for every panel of them.

The alert, silence, workload and inventory panels are each a bar of controls
over a table of rows; they differ in their models and actions, not in this.
"""

from __future__ import annotations

from collections.abc import Iterable

from PySide6.QtCore import QAbstractItemModel, QSortFilterProxyModel
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QTableView,
    QVBoxLayout,
    QWidget,
)

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

    def __init__(self, name: str, model: QAbstractItemModel, proxy: QSortFilterProxyModel,
                 parent: QWidget | None) -> None:  # fmt: skip
        super().__init__(parent)
        self.setObjectName(name)
        self.proxy = proxy
        proxy.setSourceModel(model)
