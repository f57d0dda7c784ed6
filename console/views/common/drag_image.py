"""A compact drag image: a small label ("PID 4242 · python train.py"), not the row.

Qt's item views drag a picture of every selected cell: a process row is
~1,300 px wide and hides the tiles it is dragged onto. Views that start drags
use CompactDragTable / CompactDragList, whose drag shows a label at most
MAX_SIZE, placed below and right of the cursor (OFFSET) so the tile or kill
zone under the cursor stays in sight. Colours come from the view's palette, so
the label follows the theme.
"""

from __future__ import annotations

from typing import Final

from PySide6.QtCore import QPoint, QRect, QSize, Qt
from PySide6.QtGui import QDrag, QFont, QFontMetrics, QPainter, QPalette, QPixmap
from PySide6.QtWidgets import QAbstractItemView, QListView, QTableView

from console.qt.mime import drag_text

MAX_SIZE: Final = QSize(240, 28)
PAD: Final = 8
# The label's top-left corner from the cursor: the drop target under it stays visible.
OFFSET: Final = QPoint(18, 14)


def drag_pixmap(text: str, palette: QPalette, font: QFont, ratio: float = 1.0) -> QPixmap:
    """The label: `text` elided to fit MAX_SIZE, on the palette's highlight colour."""
    metrics = QFontMetrics(font)
    shown = metrics.elidedText(text, Qt.TextElideMode.ElideRight, MAX_SIZE.width() - 2 * PAD)
    size = QSize(
        min(MAX_SIZE.width(), metrics.horizontalAdvance(shown) + 2 * PAD),
        min(MAX_SIZE.height(), metrics.height() + PAD),
    )
    pixmap = QPixmap(size * ratio)
    pixmap.setDevicePixelRatio(ratio)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setFont(font)
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(palette.color(QPalette.ColorRole.Highlight))
    painter.drawRoundedRect(QRect(QPoint(0, 0), size), 5, 5)
    painter.setPen(palette.color(QPalette.ColorRole.HighlightedText))
    painter.drawText(QRect(QPoint(0, 0), size), Qt.AlignmentFlag.AlignCenter, shown)
    painter.end()
    return pixmap


def compact_drag(view: QAbstractItemView) -> QDrag | None:
    """The drag of the view's selected rows with the compact label; None: nothing to drag."""
    model = view.model()
    indexes = [i for i in view.selectedIndexes() if i.flags() & Qt.ItemFlag.ItemIsDragEnabled]
    data = model.mimeData(indexes) if indexes and model is not None else None
    if data is None or not data.formats():
        return None
    drag = QDrag(view)
    drag.setMimeData(data)
    drag.setPixmap(drag_pixmap(drag_text(data), view.palette(), view.font(),
                               view.devicePixelRatioF()))  # fmt: skip
    drag.setHotSpot(-OFFSET)  # the pixmap's point under the cursor: outside it
    return drag


def _start(view: QAbstractItemView, actions: Qt.DropAction) -> None:
    drag = compact_drag(view)
    if drag is not None:
        drag.exec(actions, view.defaultDropAction())


class CompactDragTable(QTableView):
    """A QTableView whose drags show the compact label."""

    def startDrag(self, supportedActions: Qt.DropAction) -> None:
        _start(self, supportedActions)


class CompactDragList(QListView):
    """A QListView whose drags show the compact label."""

    def startDrag(self, supportedActions: Qt.DropAction) -> None:
        _start(self, supportedActions)
