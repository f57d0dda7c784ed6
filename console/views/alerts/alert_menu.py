"""An alert row's menu: acknowledge, silence…, copy its summary, open its GPU.

Right click, the Menu key or Shift+F10 on a row of the alert table
(console/views/common/keyboard_menus.py brings the keys). The actions the role does
not allow are listed, disabled, with the reason, as the panel's buttons are.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QModelIndex, Qt
from PySide6.QtWidgets import QApplication, QMenu, QWidget

from console.fleet.alert_rows import AlertRow

# The columns a copied summary is made of, in the table's own words (node names, not addresses).
COPIED = ("Severity", "Node", "GPU", "Rule", "Now", "Summary")


def summary_text(row: QModelIndex) -> str:
    """One line for a chat or a ticket: what the row shows in the copied columns."""
    model = row.model()
    parts = []
    for column in range(model.columnCount()):
        header = model.headerData(column, Qt.Orientation.Horizontal)
        text = model.index(row.row(), column).data()
        if header in COPIED and text:
            parts.append(str(text))
    return " · ".join(parts)


def alert_row_menu(
    parent: QWidget,
    alert: AlertRow,
    row: QModelIndex,
    refusal: str,
    acknowledge: Callable[[AlertRow], None],
    silence: Callable[[AlertRow], None],
    open_gpu: Callable[[str, int], None],
) -> QMenu:
    menu = QMenu(parent)
    menu.setObjectName("alertMenu")
    suffix = f" ({refusal})" if refusal else ""
    ack = menu.addAction("&Acknowledge" + suffix)
    ack.setEnabled(alert.firing and not alert.acknowledged and not refusal)
    ack.triggered.connect(lambda: acknowledge(alert))
    quiet = menu.addAction("&Silence…" + suffix)
    quiet.setEnabled(alert.firing and not refusal)
    quiet.triggered.connect(lambda: silence(alert))
    menu.addSeparator()
    text = summary_text(row)
    copy = menu.addAction("&Copy summary")
    copy.triggered.connect(lambda: QApplication.clipboard().setText(text))
    gpu = alert.gpu_index
    show = menu.addAction("&Open GPU" if gpu is not None else "Open GPU (the alert names none)")
    show.setEnabled(gpu is not None)
    if gpu is not None:
        show.triggered.connect(lambda: open_gpu(alert.target, gpu))
    return menu
