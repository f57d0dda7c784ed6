"""Where the fleet grid puts its tiles: grouping (by node, Slurm job, container) and geometry."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from PySide6.QtCore import QAbstractItemModel, QPoint, QRect, QSize

from console.qt import roles

TILE = QSize(104, 52)
GAP = 4
PAD = 8
HEADER_H = 24
COLUMNS = 4
BLOCK_GAP = 10
GROUPINGS = ("node", "Slurm job", "container")
Member = tuple[int, int]  # (node row, GPU row) in the fleet item model


@dataclass(frozen=True)
class Group:
    title: str
    node_row: int | None  # set for a node's own block: its header shows the node's state
    members: tuple[Member, ...]


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
    groups = [Group(f"{label} {key[:12]}", None, tuple(m)) for key, m in sorted(found.items())]
    if outside:
        none = "GPUs in no Slurm job" if slot == 0 else "GPUs outside containers"
        groups.append(Group(none, None, tuple(outside)))
    return groups


def block_width() -> int:
    return COLUMNS * TILE.width() + (COLUMNS - 1) * GAP + 2 * PAD


def lay_out(groups: list[Group], width: int) -> tuple[list[Block], int]:
    """Blocks flowing left to right, then down; returns them and the total height."""
    per_row = max(1, (width - BLOCK_GAP) // (block_width() + BLOCK_GAP))
    blocks: list[Block] = []
    y, row_height, slot = BLOCK_GAP, 0, 0
    for group in groups:
        lines = max(1, -(-len(group.members) // COLUMNS))
        height = HEADER_H + lines * (TILE.height() + GAP) + PAD
        if slot == per_row:
            y, slot, row_height = y + row_height + BLOCK_GAP, 0, 0
        x = BLOCK_GAP + slot * (block_width() + BLOCK_GAP)
        rect = QRect(x, y, block_width(), height)
        blocks.append(Block(group, rect, _tiles(rect, len(group.members))))
        row_height, slot = max(row_height, height), slot + 1
    return blocks, y + row_height + BLOCK_GAP


def _tiles(rect: QRect, count: int) -> tuple[QRect, ...]:
    tiles = []
    for i in range(count):
        x = rect.x() + PAD + (i % COLUMNS) * (TILE.width() + GAP)
        y = rect.y() + HEADER_H + (i // COLUMNS) * (TILE.height() + GAP)
        tiles.append(QRect(QPoint(x, y), TILE))
    return tuple(tiles)
