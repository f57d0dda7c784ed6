"""How a drag's verdict looks over the grid: outlined tiles and a bubble with the reason."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QColor, QFont, QPainter, QPen

from console.fleet.placement import Verdict

ACCEPT = QColor("#48bb78")
REFUSE = QColor("#f56565")
BUBBLE_FILL = QColor(20, 23, 28, 235)
BUBBLE_WIDTH = 300
MARGIN = 6


def paint_drop_verdict(
    painter: QPainter, hovered: QRect, tiles: Sequence[QRect], verdict: Verdict, bounds: QRect
) -> None:
    """Outline the tiles the drop would use; explain beside the hovered one."""
    color = ACCEPT if verdict.ok else REFUSE
    painter.setBrush(Qt.BrushStyle.NoBrush)
    for tile in tiles:
        style = Qt.PenStyle.SolidLine if tile == hovered else Qt.PenStyle.DashLine
        painter.setPen(QPen(color, 3, style))
        painter.drawRoundedRect(tile.adjusted(-2, -2, 2, 2), 5, 5)
    _bubble(painter, hovered, ("✓ " if verdict.ok else "✗ ") + verdict.reason, color, bounds)


def _bubble(painter: QPainter, anchor: QRect, text: str, color: QColor, bounds: QRect) -> None:
    font = QFont()
    font.setPointSizeF(9)
    painter.setFont(font)
    width = min(BUBBLE_WIDTH, bounds.width() - 2 * MARGIN)
    flags = int(Qt.TextFlag.TextWordWrap) | int(Qt.AlignmentFlag.AlignLeft)
    text_rect = painter.fontMetrics().boundingRect(QRect(0, 0, width - 16, 1000), flags, text)
    box = QRect(0, 0, width, text_rect.height() + 12)
    # Below the tile, unless that runs off the bottom; kept inside the widget sideways.
    box.moveTop(anchor.bottom() + MARGIN)
    box.moveLeft(anchor.left())
    if box.bottom() > bounds.bottom() - MARGIN:
        box.moveBottom(anchor.top() - MARGIN)
    box.moveLeft(max(bounds.left() + MARGIN, min(box.left(), bounds.right() - MARGIN - width)))
    painter.setPen(QPen(color, 2))
    painter.setBrush(BUBBLE_FILL)
    painter.drawRoundedRect(box, 6, 6)
    painter.setPen(QColor("#f7fafc"))
    painter.drawText(box.adjusted(8, 6, -8, -6), flags, text)
