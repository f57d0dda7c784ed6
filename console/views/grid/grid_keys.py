"""Where the arrow keys go in the fleet grid: geometry only, over the laid-out blocks.

Left and right stay in a tile's block (a node, or a job's group); up and down go
to the nearest tile of the row above or below, across blocks; Home and End go to
a block's first and last tile, with Ctrl to the grid's.
"""

from __future__ import annotations

from PySide6.QtCore import QRect, Qt

from console.views.grid.grid_layout import Block

Spot = tuple[int, int]  # (block, tile) in the grid's blocks

MOVES = {
    Qt.Key.Key_Left,
    Qt.Key.Key_Right,
    Qt.Key.Key_Up,
    Qt.Key.Key_Down,
    Qt.Key.Key_Home,
    Qt.Key.Key_End,
}


def first_spot(blocks: list[Block]) -> Spot | None:
    return next(((b, 0) for b, block in enumerate(blocks) if block.tiles), None)


def move(blocks: list[Block], spot: Spot, key: Qt.Key, whole_grid: bool = False) -> Spot:
    """The spot a key press moves to from `spot` (itself where there is nowhere to go)."""
    b, t = spot
    last = len(blocks[b].tiles) - 1
    if key == Qt.Key.Key_Left:
        return b, max(0, t - 1)
    if key == Qt.Key.Key_Right:
        return b, min(last, t + 1)
    if key in (Qt.Key.Key_Home, Qt.Key.Key_End):
        return _end(blocks, spot, key == Qt.Key.Key_End, whole_grid)
    if key in (Qt.Key.Key_Up, Qt.Key.Key_Down):
        return _vertical(blocks, spot, down=key == Qt.Key.Key_Down)
    return spot


def _end(blocks: list[Block], spot: Spot, last: bool, whole_grid: bool) -> Spot:
    filled = [b for b, block in enumerate(blocks) if block.tiles]
    b = (filled[-1] if last else filled[0]) if whole_grid else spot[0]
    return b, len(blocks[b].tiles) - 1 if last else 0


def _vertical(blocks: list[Block], spot: Spot, down: bool) -> Spot:
    """The nearest tile in the next row of tiles above or below (any block)."""
    here = blocks[spot[0]].tiles[spot[1]].center()
    best: tuple[int, int, Spot] | None = None
    for b, block in enumerate(blocks):
        for t, tile in enumerate(block.tiles):
            dy = tile.center().y() - here.y()
            if (dy <= 0) if down else (dy >= 0):
                continue
            key = (abs(dy), abs(tile.center().x() - here.x()), (b, t))
            if best is None or key < best:
                best = key
    return best[2] if best is not None else spot


def ring_area(tile: QRect) -> QRect:
    """What to repaint when the focus ring comes or goes (it is drawn in the gap)."""
    return tile.adjusted(-3, -3, 3, 3)
