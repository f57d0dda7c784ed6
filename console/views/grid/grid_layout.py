"""Where the fleet grid puts its tiles: grouping (by node, Slurm job, container) and geometry.

Tiles follow the room they have (`fit`): as large as lets every block fit the
visible area, up to TILE_MAX, and down to a compact size for a fleet of 1,000+
GPUs (a tile then shows its colour and one figure). Only below COMPACT_MIN does
the grid scroll. Large tiles may be squarer (a few nodes on a 4K screen fill the
grid instead of a strip of it); small ones keep a flat card's shape.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from PySide6.QtCore import QAbstractItemModel, QPoint, QRect, QSize

from console.qt import roles

COLUMNS = 4
GROUPINGS = ("node", "Slurm job", "container")
Member = tuple[int, int]  # (node row, GPU row) in the fleet item model
# A tile's width and height bounds, by how much it shows (px).
TILE_MAX = QSize(480, 400)
FULL_MIN = QSize(84, 44)  # label, temperature, middle line, utilisation (memory from 100 px)
COMPACT_MIN = QSize(16, 11)  # colour, frame and a two-digit figure
# Height to width: no taller than square-ish, no flatter than a strip; a large tile
# (LARGE_TILE wide or more) may be taller, up to a card a little taller than wide.
ASPECT = (0.34, 0.62)
LARGE_TALLEST = 1.25
LARGE_TILE = 120


@dataclass(frozen=True)
class Metrics:
    """The geometry of one layout: tile size and the spacing that goes with it."""

    tile: QSize
    gap: int  # between tiles
    pad: int  # inside a block, around its tiles
    header_h: int  # a block's title line
    block_gap: int  # between blocks

    @property
    def compact(self) -> bool:
        return self.tile.width() < FULL_MIN.width() or self.tile.height() < FULL_MIN.height()

    @property
    def large(self) -> bool:
        """Room for larger type (a big screen, few nodes)."""
        return self.tile.width() >= 150 and self.tile.height() >= 72

    @property
    def wall(self) -> bool:
        """Room for a wall's type (a few nodes filling a 4K screen: read from afar)."""
        return self.tile.width() >= 240 and self.tile.height() >= 160

    def block_width(self) -> int:
        return COLUMNS * self.tile.width() + (COLUMNS - 1) * self.gap + 2 * self.pad

    def block_height(self, members: int) -> int:
        lines = max(1, -(-members // COLUMNS))
        return self.header_h + lines * (self.tile.height() + self.gap) + self.pad


FULL_SPACING = (4, 8, 24, 10)  # gap, pad, header, block gap
COMPACT_SPACING = (2, 4, 15, 6)
DEFAULT = Metrics(QSize(104, 52), *FULL_SPACING)  # before the grid knows its room
SMALLEST = Metrics(COMPACT_MIN, *COMPACT_SPACING)  # below it the grid scrolls
# Kept for callers that place things beside the default layout.
BLOCK_GAP = DEFAULT.block_gap
PAD = DEFAULT.pad


@dataclass(frozen=True)
class Group:
    title: str
    node_row: int | None  # set for a node's own block: its header shows the node's state
    members: tuple[Member, ...]
    key: str = ""  # the Slurm job or container id of a placement group
    grouping: str = "node"


@dataclass(frozen=True)
class Block:
    group: Group
    rect: QRect
    tiles: tuple[QRect, ...]


def node_groups(model: QAbstractItemModel) -> list[Group]:
    groups = []
    for row in range(model.rowCount()):
        gpus = model.rowCount(model.index(row, 0))
        groups.append(
            Group(str(model.index(row, 0).data()), row, tuple((row, g) for g in range(gpus)))
        )
    return groups


def placement_groups(model: QAbstractItemModel, grouping: str) -> list[Group]:
    """GPUs gathered by the Slurm job or container of their processes (the first, if several)."""
    slot = 0 if grouping == "Slurm job" else 1
    found: dict[str, list[Member]] = defaultdict(list)
    outside: list[Member] = []
    for row in range(model.rowCount()):
        node = model.index(row, 0)
        for gpu in range(model.rowCount(node)):
            placement = model.index(gpu, 0, node).data(roles.PLACEMENT_ROLE) or ((), ())
            keys = placement[slot]
            (found[keys[0]] if keys else outside).append((row, gpu))
    label = "Slurm job" if slot == 0 else "container"
    groups = [Group(f"{label} {_middle(key, 24)}", None, tuple(m), key, grouping)
              for key, m in sorted(found.items())]  # fmt: skip
    if outside:
        none = "GPUs in no Slurm job" if slot == 0 else "GPUs outside containers"
        groups.append(Group(none, None, tuple(outside), "", grouping))
    return groups


def tile_labels(group: Group, node: str, gpu: int) -> tuple[str, ...]:
    """A tile's labels, longest first: in a node's block "GPU 1"; grouped, the node stays
    ("job 4242 · gpu-node-03:1", else "gpu-node-03:1", shortened from the middle)."""
    if group.node_row is not None:
        return (f"GPU {gpu}",)
    place = f"{node}:{gpu}"
    if not group.key:
        return (place,)
    word = "job" if group.grouping == "Slurm job" else "container"
    return (f"{word} {_middle(group.key, 12)} · {place}", place)


def _middle(text: str, most: int) -> str:
    """Shortened from the middle: a job id's or container id's both ends tell it apart."""
    if len(text) <= most:
        return text
    keep = most - 1
    return text[: keep - keep // 2] + "…" + text[len(text) - keep // 2 :]


# -- sizing -------------------------------------------------------------------------


def fit(counts: Sequence[int], width: int, height: int) -> Metrics:
    """The largest tiles with which blocks of `counts` GPUs fit `width` x `height`.

    Tries every number of blocks per row: each gives the widest tile the width
    allows and the tallest the rows of blocks allow (within ASPECT); the biggest
    tile wins. Where even compact tiles do not fit, the smallest (the grid scrolls).
    """
    if not counts:
        return DEFAULT
    lines = [max(1, -(-c // COLUMNS)) for c in counts]  # each block's tile lines
    best: tuple[int, Metrics] | None = None
    # More blocks a row than compact tiles allow gives nothing: 1,250 nodes try ~40
    # numbers, not 1,250 (each a pass over every block).
    for per_row in range(1, min(len(counts), _per_row(SMALLEST, width)) + 1):
        metrics = _sized(lines, per_row, width, height)
        if metrics is not None and (best is None or _area(metrics) > best[0]):
            best = (_area(metrics), metrics)
        if metrics is None and best is not None and per_row > 2 * _per_row(best[1], width):
            break  # ever narrower tiles: nothing better comes
    return best[1] if best is not None else SMALLEST


def _area(metrics: Metrics) -> int:
    return metrics.tile.width() * metrics.tile.height()


def _per_row(metrics: Metrics, width: int) -> int:
    return max(1, (width - metrics.block_gap) // (metrics.block_width() + metrics.block_gap))


def _sized(lines: Sequence[int], per_row: int, width: int, height: int) -> Metrics | None:
    """Tiles for `per_row` blocks a row (of `lines` tile lines each) that fit, full size if
    they can, else compact."""
    rows = _rows_of_blocks(lines, per_row)
    for spacing in (FULL_SPACING, COMPACT_SPACING):
        gap, pad, header, block_gap = spacing
        tile_w = (width - block_gap) // per_row - block_gap - 2 * pad - (COLUMNS - 1) * gap
        tile_w = min(tile_w // COLUMNS, TILE_MAX.width())
        room = (height - block_gap) - len(rows) * (block_gap + header + pad)
        total = sum(rows)
        tile_h = min(room // total - gap if total else TILE_MAX.height(), TILE_MAX.height())
        tallest = LARGE_TALLEST if tile_w >= LARGE_TILE else ASPECT[1]
        tile_h = min(tile_h, int(tile_w * tallest))
        tile_w = min(tile_w, int(tile_h / ASPECT[0]))
        metrics = Metrics(QSize(tile_w, tile_h), *spacing)
        low = FULL_MIN if spacing is FULL_SPACING else COMPACT_MIN
        if tile_w >= low.width() and tile_h >= low.height():
            return metrics
    return None


def _rows_of_blocks(lines: Sequence[int], per_row: int) -> list[int]:
    """For each row of blocks, the tile lines of its tallest block."""
    return [max(lines[i : i + per_row]) for i in range(0, len(lines), per_row)]


# -- placing ------------------------------------------------------------------------


def lay_out(groups: list[Group], width: int, metrics: Metrics = DEFAULT) -> tuple[list[Block], int]:
    """Blocks flowing left to right, then down; returns them and the total height."""
    gap = metrics.block_gap
    block_w = metrics.block_width()
    per_row = _per_row(metrics, width)
    blocks: list[Block] = []
    y, row_height, slot = gap, 0, 0
    for group in groups:
        height = metrics.block_height(len(group.members))
        if slot == per_row:
            y, slot, row_height = y + row_height + gap, 0, 0
        x = gap + slot * (block_w + gap)
        rect = QRect(x, y, block_w, height)
        blocks.append(Block(group, rect, _tiles(rect, len(group.members), metrics)))
        row_height, slot = max(row_height, height), slot + 1
    return blocks, y + row_height + gap


def _tiles(rect: QRect, count: int, metrics: Metrics) -> tuple[QRect, ...]:
    tiles = []
    size, gap = metrics.tile, metrics.gap
    for i in range(count):
        x = rect.x() + metrics.pad + (i % COLUMNS) * (size.width() + gap)
        y = rect.y() + metrics.header_h + (i // COLUMNS) * (size.height() + gap)
        tiles.append(QRect(QPoint(x, y), size))
    return tuple(tiles)
