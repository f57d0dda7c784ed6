"""CompactTile: a GPU tile at its smallest, for a fleet of 1,000+ GPUs on one screen.

Its colour, one figure (the value the colour shows, whole units) and marks in
the corners: a frame for an alert, a stripe for a reservation, a dot for health
that needs a look. The label, the middle line and the badges do not fit: the
tooltip and the detail panel say the rest. Cheap by design (rectangles, no
antialiasing, figures laid out once): every tile of the fleet may repaint at once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QColor, QFont, QPainter, QPen, QStaticText

from console.fleet.columns import Row, value
from console.fleet.health import GpuCondition
from console.fleet.health_words import tile_tag
from console.fleet.updates import LinkState
from console.qt.roles import TileData
from gpufleet.v1.alert_severity import Severity
from gpufleet.v1.gpu_metrics import GpuMetric

# What the full painter read of the GPU's node: stale, its link.
NodeFacts = tuple[bool, LinkState]


@dataclass(frozen=True)
class CompactStyle:
    alerts: Mapping[Severity, QColor]
    stale: QColor
    text: QColor
    reserved: QColor
    health_mark: Callable[[GpuCondition], QColor]  # the dot of a GPU that is not healthy


class TileOwner(Protocol):
    """What a compact tile reads of the full painter that owns it (TilePainter)."""

    small: QFont

    @property
    def colour_metric(self) -> GpuMetric[Any]: ...

    def fill(self, health: str | None, row: Row | None, state: LinkState) -> QColor: ...

    def text(self, big: bool, text: str) -> QStaticText: ...


class CompactTile:
    def __init__(self, owner: TileOwner, style: CompactStyle) -> None:
        self._owner, self._style = owner, style
        self._figures: dict[str, tuple[QStaticText, int, int]] = {}  # text, width, height
        self._text_pen = False  # whether the painter's pen is the figures' now

    def begin(self, painter: QPainter) -> None:
        """Before a block's tiles: their one font and pen (the figures set neither again
        unless a frame took the pen)."""
        painter.setFont(self._owner.small)
        painter.setPen(self._style.text)
        self._text_pen = True

    def forget_figures(self) -> None:
        """The font changed: lay the figures out again."""
        self._figures.clear()

    def paint(
        self,
        painter: QPainter,
        facts: TileData,
        tile: QRect,
        node: NodeFacts,
        selected: bool,
    ) -> None:
        (stale, state), style = node, self._style
        health, row, condition = facts.health, facts.row, facts.condition
        painter.fillRect(tile, style.stale if stale else self._owner.fill(health, row, state))
        if facts.reservation is not None:
            painter.fillRect(QRect(tile.x(), tile.y(), 2, tile.height()), style.reserved)
        if condition is not None and health != "lost" and tile_tag(condition) is not None:
            mark = QRect(tile.right() - 4, tile.y() + 1, 4, 4)
            painter.fillRect(mark, style.health_mark(condition))
        self._frame(painter, tile, facts.alert, selected)
        self._figure(painter, tile, health, row, stale)

    def _frame(
        self, painter: QPainter, tile: QRect, severity: Severity | None, selected: bool
    ) -> None:
        if severity is not None or selected:
            self._text_pen = False
        if severity is not None:
            width = 2 if severity is Severity.CRITICAL else 1
            painter.setPen(QPen(self._style.alerts[severity], width))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRect(tile.adjusted(width // 2, width // 2, -1, -1))
        if selected:
            painter.setPen(QPen(QColor("#ffffff"), 1))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRect(tile.adjusted(0, 0, -1, -1))

    def _figure(
        self, painter: QPainter, tile: QRect, health: str | None, row: Row | None, stale: bool
    ) -> None:
        """The colour's value, centred; dropped where it does not fit."""
        if health == "lost":
            text = "\u00d7"  # lost
        else:
            shown = value(row, self._owner.colour_metric)
            text = "-" if shown is None or stale else f"{shown:.0f}"
        figure = self._figures.get(text)
        if figure is None:
            static = self._owner.text(False, text)
            size = static.size()
            figure = (static, math.ceil(size.width()), math.ceil(size.height()))
            self._figures[text] = figure
        static, width, height = figure
        if width > tile.width() - 2 or height > tile.height() + 2:
            return
        if not self._text_pen:
            painter.setPen(self._style.text)
            self._text_pen = True
        x = tile.x() + (tile.width() - width) // 2
        y = tile.y() + (tile.height() - height) // 2
        painter.drawStaticText(x, y, static)
