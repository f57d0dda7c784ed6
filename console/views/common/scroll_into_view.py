"""Scroll a widget into sight inside every scroll area that holds it.

A shortcut that focuses a widget (Ctrl+P: the process table) must also show
it: Qt scrolls a QScrollArea to its focused child only on Tab, not on
setFocus. The scroll areas are found by walking the widget's parents, so the
caller needs to know nothing of the window's layout (the detail's
"detailScroll" today; any area it moves into later).

Not QScrollArea.ensureWidgetVisible: for an item view it shows the current
cell only (the view's input-method rectangle), leaving the rest of the table
cut off at the viewport's edge.
"""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QScrollArea, QWidget

MARGIN_PX = 8  # room around it, so its frame shows too


def scroll_into_view(widget: QWidget) -> None:
    """Innermost area first: an outer one then scrolls to where the inner one now stands."""
    parent = widget.parentWidget()
    while parent is not None:
        if isinstance(parent, QScrollArea):
            _show_in(parent, widget)
        parent = parent.parentWidget()


def _show_in(area: QScrollArea, widget: QWidget) -> None:
    """The whole widget when it fits in the viewport, else its top (and left)."""
    inner = area.widget()
    if inner is None or not inner.isAncestorOf(widget):
        return  # in the area's scroll bars or corner, not in what it scrolls
    top_left = widget.mapTo(inner, QPoint(0, 0))
    if area.horizontalScrollBarPolicy() is Qt.ScrollBarPolicy.ScrollBarAlwaysOff:
        # No bar to scroll back with: stay where it is sideways (the visible left edge).
        middle, x_margin = area.horizontalScrollBar().value(), 0
    else:
        x_margin = min(widget.width(), area.viewport().width()) // 2
        middle = top_left.x() + x_margin
    # The bottom edge first, then the top: where both cannot show, the top wins.
    area.ensureVisible(middle, top_left.y() + widget.height(), x_margin, MARGIN_PX)
    area.ensureVisible(middle, top_left.y(), x_margin, MARGIN_PX)
