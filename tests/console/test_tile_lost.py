"""A lost GPU's tile: its words and its alert badge side by side, never one over the other.

Painted by the grid's own painters (TilePainter, and CompactTile for the smallest
tiles) onto an image, at each tier's tile size, once without an alert and once
with a critical one; the pixels tell whether the badge covered any of the words.
"""

from __future__ import annotations

from typing import Any

import pytest
from PySide6.QtCore import QModelIndex, QPoint, QRect, QSize
from PySide6.QtGui import QColor, QImage, QPainter

from console.fleet.updates import LinkState
from console.qt import roles
from console.views.grid.grid_layout import (
    COMPACT_SPACING,
    FULL_MIN,
    FULL_SPACING,
    TILE_MAX,
    Metrics,
)
from console.views.grid.tile_painter import (
    ALERT_COLORS,
    BLOCK_FILL,
    TEXT,
    TilePainter,
    badge_size,
)
from gpufleet.v1.alert_severity import Severity

BADGE_RED = ALERT_COLORS[Severity.CRITICAL]


def paint_lost(size: QSize, compact: bool, alert: Severity | None) -> tuple[QImage, QRect]:
    """One lost GPU's tile, as the grid paints it, on a block's fill."""
    facts = roles.TileData("lost", None, None, None, None, alert)

    def read(index: QModelIndex, role: int) -> Any:
        assert role == roles.TILE_ROLE
        return facts

    painter = TilePainter(read)
    painter.set_metrics(Metrics(size, *(COMPACT_SPACING if compact else FULL_SPACING)))
    assert painter.metrics.compact is compact
    image = QImage(size.width() + 20, size.height() + 20, QImage.Format.Format_ARGB32)
    image.fill(BLOCK_FILL)
    tile = QRect(QPoint(10, 10), size)
    qp = QPainter(image)
    qp.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.begin_tiles(qp)
    painter.tile(qp, QModelIndex(), tile, ("GPU 1",), False, (LinkState.CONNECTED, None))
    qp.end()
    return image, tile


def near(found: QColor, wanted: QColor, within: int = 40) -> bool:
    return (abs(found.red() - wanted.red()) + abs(found.green() - wanted.green())
            + abs(found.blue() - wanted.blue())) < within  # fmt: skip


def pixels(image: QImage, area: QRect, colour: QColor, within: int = 40) -> list[QPoint]:
    return [QPoint(x, y) for x in range(area.left(), area.right() + 1)
            for y in range(area.top(), area.bottom() + 1)
            if near(image.pixelColor(x, y), colour, within)]  # fmt: skip


def bounds(points: list[QPoint]) -> QRect:
    xs, ys = [p.x() for p in points], [p.y() for p in points]
    return QRect(QPoint(min(xs), min(ys)), QPoint(max(xs), max(ys)))


@pytest.mark.parametrize(
    "size",
    [FULL_MIN, QSize(104, 52), QSize(160, 90), TILE_MAX],
    ids=["smallest", "default", "large", "largest"],
)
def test_a_lost_tile_shows_its_words_and_its_badge_apart(qtbot, size: QSize) -> None:
    calm, tile = paint_lost(size, False, None)
    alerted, _ = paint_lost(size, False, Severity.CRITICAL)
    inside = tile.adjusted(5, 5, -5, -5)  # within the alert's frame
    words = pixels(calm, inside, TEXT)  # "GPU 1" and "LOST"
    assert len(words) > 60
    red = pixels(alerted, inside, BADGE_RED)
    assert len(red) > 100  # the badge is there, not only the frame
    badge = bounds(red)
    most = badge_size(Metrics(size, *FULL_SPACING)) + 1  # larger on a wall's tiles
    assert badge.width() <= most and badge.height() <= most  # one disc, nothing else red
    still = [p for p in pixels(alerted, inside, TEXT) if not badge.contains(p)]
    # Every pixel of the words is still seen, outside the badge: nothing of them lies under it.
    assert len(still) >= len(words), (len(still), len(words))
    assert max(p.x() for p in still) < badge.left()  # the word first, its badge after it


def test_a_compact_lost_tile_keeps_its_mark_inside_the_frame(qtbot) -> None:
    size = QSize(40, 24)  # a compact tile: colour, frame and one mark, no room for a badge
    calm, tile = paint_lost(size, True, None)
    alerted, _ = paint_lost(size, True, Severity.CRITICAL)
    fill = calm.pixelColor(tile.topLeft())
    mark = [p for p in pixels(calm, tile, fill, within=1_000) if calm.pixelColor(p) != fill]
    assert len(mark) > 5  # the small cross of a lost GPU
    assert len(pixels(alerted, tile, BADGE_RED)) > 50  # the frame
    assert all(alerted.pixelColor(p) == calm.pixelColor(p) for p in mark)  # the mark whole
