"""Tiles that fill the window: the real window over real daemons at 1366x768, 1920x1080 and
3840x2160; compact tiles for 1,000 GPUs; sorting; labels that keep the node when grouped.

Geometry is asserted on the laid-out tiles and the scroll area's viewport: what a
person sees without scrolling is what lies inside the viewport.
"""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtGui import QFont, QFontMetrics
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QScrollArea

from console.fleet.model import Change, FleetModel
from console.fleet.tile_order import TileFacts, TileOrder, ordered, ordered_groups
from console.main_window import MainWindow
from console.qt import roles
from console.qt.fleet_item_model import FleetItemModel
from console.views.grid import grid_layout
from console.views.grid.fleet_grid import FleetGrid
from console.views.grid.grid_layout import (
    COMPACT_MIN,
    DEFAULT,
    TILE_MAX,
    Group,
    Metrics,
    fit,
    lay_out,
    tile_labels,
)
from console.views.grid.tile_painter import TilePainter
from gpufleet.v1.gpu_metrics import MEM_TOTAL_BYTES, MEM_USED_BYTES, TEMP_GPU_C, UTIL_GPU_PCT
from tests.console.hand_fed import gpus_of, node_up, samples, simulated_node
from tests.console.test_main_window import open_window, wait_connected

__all__ = ["open_window"]  # a fixture, used by name


# -- the real window over real daemons ----------------------------------------------


def four_nodes(qtbot, open_window, start_daemon) -> MainWindow:  # type: ignore[no-untyped-def]
    daemons = [start_daemon(gpus=8, hostname=f"gpu-node-{n:02d}") for n in range(1, 5)]
    window = open_window(*(str(d.address) for d in daemons))
    for daemon in daemons:
        wait_connected(qtbot, window, str(daemon.address))
    return window


def resized(qtbot, window: MainWindow, width: int, height: int) -> list[QRect]:  # type: ignore[no-untyped-def]
    """Every tile after the window took `width` x `height` (and the grid its new room)."""
    window.resize(width, height)
    viewport = window.grid_part.fleet_scroll.viewport()
    qtbot.waitUntil(lambda: window.grid.width() == viewport.width(), timeout=5_000)
    QTest.qWait(0)  # the relayouts the resize posted
    return [tile for block in window.grid.blocks for tile in block.tiles]


def in_view(window: MainWindow, tiles: list[QRect]) -> bool:
    """All tiles visible without scrolling: inside the viewport, with no scroll bar to move."""
    scroll = window.grid_part.fleet_scroll
    seen = QRect(QPoint(0, 0), scroll.viewport().size())
    offset = QPoint(scroll.horizontalScrollBar().value(), scroll.verticalScrollBar().value())
    return scroll.verticalScrollBar().maximum() == 0 and all(
        seen.contains(tile.translated(-offset)) for tile in tiles
    )


def test_four_nodes_fit_at_1366x768(qtbot, open_window, start_daemon) -> None:
    window = four_nodes(qtbot, open_window, start_daemon)
    window.showNormal()
    tiles = resized(qtbot, window, 1366, 768)
    assert len(tiles) == 32
    assert in_view(window, tiles), "all 4 nodes x 8 GPUs visible at 1366x768, no scrolling"
    assert not window.grid.metrics.compact  # still room for the label and the numbers
    assert len({(t.x(), t.y()) for t in tiles}) == 32  # no two tiles on one spot


def test_tiles_grow_to_fill_full_hd_and_4k(qtbot, open_window, start_daemon) -> None:
    window = four_nodes(qtbot, open_window, start_daemon)
    sizes = {}
    for width, height in ((1920, 1080), (3840, 2160)):
        tiles = resized(qtbot, window, width, height)
        assert in_view(window, tiles)
        viewport = window.grid_part.fleet_scroll.viewport().size()
        used = QRect()
        for block in window.grid.blocks:
            used = used.united(block.rect)
        tile = window.grid.metrics.tile
        # Filled: the blocks reach across most of the width or down most of the height,
        # or the tiles have reached their largest size.
        filled = used.width() >= 0.8 * viewport.width() or used.height() >= 0.8 * viewport.height()
        assert filled or tile.width() == TILE_MAX.width() or tile.height() == TILE_MAX.height(), (
            f"{width}x{height}: tiles {tile.toTuple()} use {used.size().toTuple()} "
            f"of {viewport.toTuple()}"
        )
        assert tile.width() > DEFAULT.tile.width() and tile.height() > DEFAULT.tile.height()
        sizes[width] = tile.width() * tile.height()
    assert sizes[3840] > sizes[1920]  # a bigger screen, bigger tiles
    assert window.grid.metrics.large  # and larger type


def test_a_click_still_opens_the_tile_under_it_after_a_resize(
    qtbot, open_window, start_daemon
) -> None:
    window = four_nodes(qtbot, open_window, start_daemon)
    resized(qtbot, window, 1366, 768)
    block = window.grid.blocks[3]
    qtbot.mouseClick(window.grid, Qt.MouseButton.LeftButton, pos=block.tiles[5].center())
    target = window.session.items.index(block.group.node_row, 0).data(roles.TARGET_ROLE)
    assert window.grid.selected == (target, block.group.members[5][1])


# -- 1,000 GPUs: compact --------------------------------------------------------------


def big_fleet(nodes: int = 125, gpus: int = 8) -> FleetModel:
    """A fleet as the network would fill it: inventories, links, one tick each."""
    fleet = FleetModel(ring_capacity=4)
    rng = np.random.default_rng(7)
    for n in range(nodes):
        target = f"127.0.0.1:{41000 + n}"
        fleet.add_node(target)
        gpu_infos = gpus_of(gpus, f"GPU-{n:03d}-", model="NVIDIA H100")
        fleet.apply_all(node_up(target, simulated_node(f"gpu-node-{n:03d}", gpu_infos)))
        readings = {
            TEMP_GPU_C: rng.uniform(30, 80, gpus).round(),
            UTIL_GPU_PCT: rng.uniform(0, 100, gpus).round(),
            MEM_USED_BYTES: 10,
            MEM_TOTAL_BYTES: 80,
        }
        assert fleet.apply(samples(target, 1e9, gpus, readings)) is Change.DATA
    return fleet


def scrolled_grid(
    qtbot, fleet: FleetModel, width: int, height: int
) -> tuple[FleetGrid, QScrollArea]:  # type: ignore[no-untyped-def]
    """The grid in a scroll area, as the window holds it, with a `width` x `height` view.

    The test holds the scroll area (it owns the grid) till its end. Not the grid: grid ->
    scroll -> grid is a reference cycle, and the collector clearing it while Qt still
    delivered the grid's focus-out at the test's end broke that event (seen once).
    """
    items = FleetItemModel(fleet)
    grid = FleetGrid(items)
    scroll = QScrollArea()
    scroll.setFrameShape(QScrollArea.Shape.NoFrame)
    scroll.setWidgetResizable(True)
    scroll.setWidget(grid)
    qtbot.addWidget(scroll)
    scroll.resize(width, height)
    scroll.show()
    qtbot.waitUntil(lambda: grid.width() == scroll.viewport().width() > 0, timeout=5_000)
    grid.items = items  # kept alive with the widget
    return grid, scroll


def test_a_thousand_gpus_fit_one_screen_as_compact_tiles(qtbot) -> None:
    fleet = big_fleet()
    grid, scroll = scrolled_grid(qtbot, fleet, 1150, 800)  # a 1920x1080 window's grid part
    tiles = [tile for block in grid.blocks for tile in block.tiles]
    assert len(tiles) == 1000 and grid.metrics.compact
    view = QRect(0, 0, 1150, 800)
    assert all(view.contains(tile) for tile in tiles), "all 1,000 GPUs without scrolling"
    assert grid.minimumHeight() == 0  # nothing holds the grid taller than its view
    qtbot.waitUntil(lambda: scroll.verticalScrollBar().maximum() == 0, timeout=5_000)
    # A compact tile is its colour and one figure; its label does not fit and is left out.
    image = grid.grab().toImage()
    ratio = image.devicePixelRatio()
    tile = grid.tile_rect("127.0.0.1:41000", 0)
    assert tile is not None
    fill = image.pixelColor(QPoint(tile.x() + 1, tile.y() + 1) * ratio)
    assert fill.saturation() > 60, "the tile is coloured by its temperature"
    middle = [image.pixelColor(QPoint(x, y) * ratio) for x in range(tile.x(), tile.right())
              for y in range(tile.y() + 2, tile.bottom() - 1)]  # fmt: skip
    assert sum(c.lightness() > 200 for c in middle) > 5, "the figure is drawn"
    top_left = [image.pixelColor(QPoint(x, tile.y() + 2) * ratio) for x in range(tile.x() + 1,
                tile.x() + 4)]  # fmt: skip
    assert all(c == fill for c in top_left), "no label text in the corner"


def test_fleets_too_big_for_compact_tiles_scroll(qtbot) -> None:
    grid, scroll = scrolled_grid(qtbot, big_fleet(nodes=500), 800, 500)
    assert grid.metrics.compact and grid.metrics.tile.height() >= 11
    assert scroll.verticalScrollBar().maximum() > 0  # the rest is a scroll away


def test_fit_grows_to_the_largest_tile_and_shrinks_to_compact() -> None:
    four = fit([8] * 4, 3000, 2000)
    assert four.tile.height() == TILE_MAX.height() and not four.compact
    assert fit([8] * 4, 800, 480).tile.width() >= 84  # 1366x768's grid: full tiles
    assert fit([8] * 125, 1150, 800).compact
    assert fit([], 800, 600) == DEFAULT


def every_blocks_a_row(counts: list[int], width: int, height: int) -> Metrics:
    """fit as it was before it bounded the blocks a row: every number tried."""
    best = None
    for per_row in range(1, len(counts) + 1):
        lines = [max(1, -(-c // 4)) for c in counts]
        metrics = grid_layout._sized(lines, per_row, width, height)
        if metrics is not None and (best is None or grid_layout._area(metrics) > best[0]):
            best = (grid_layout._area(metrics), metrics)
    return best[1] if best is not None else Metrics(COMPACT_MIN, *grid_layout.COMPACT_SPACING)


@pytest.mark.parametrize(
    ("counts", "width", "height"),
    [([8] * 1250, 3400, 1900), ([8] * 1250, 1150, 800), ([8] * 125, 1150, 800),
     ([4, 8, 2, 8, 16, 1] * 40, 2000, 1200), ([8] * 3, 500, 300), ([2] * 700, 3800, 2000)],
)  # fmt: skip
def test_fit_tries_only_what_can_fit_and_finds_the_same_tiles(
    counts: list[int], width: int, height: int
) -> None:
    """1,250 nodes (10,000 GPUs) tried every number of blocks a row, each a pass over
    every block: 9 s of a connecting console's GUI thread. The bound changes no answer."""
    assert fit(counts, width, height) == every_blocks_a_row(counts, width, height)


def test_ten_thousand_gpus_fit_a_4k_grid_as_compact_tiles() -> None:
    metrics = fit([8] * 1250, 3400, 1900)  # a 3840x2160 window's grid part
    groups = [Group(f"n{i}", i, tuple((i, g) for g in range(8))) for i in range(1250)]
    _blocks, total = lay_out(groups, 3400, metrics)
    assert metrics.compact and total <= 1900  # every GPU without scrolling


@pytest.mark.parametrize(
    ("nodes", "width", "height"),
    [(4, 2380, 1500), (2, 2380, 1500), (8, 2380, 1500), (16, 2380, 1500), (4, 1200, 700)],
)
def test_a_few_nodes_on_a_big_grid_fill_it(nodes: int, width: int, height: int) -> None:
    """A 4K screen's grid (its first start's share) is filled, not a strip at the top:
    large tiles may be squarer, up to a card a little taller than wide."""
    metrics = fit([8] * nodes, width, height)
    groups = [Group(f"n{i}", i, tuple((i, g) for g in range(8))) for i in range(nodes)]
    blocks, total = lay_out(groups, width, metrics)
    assert total <= height  # no scrolling
    used = sum(b.rect.width() * b.rect.height() for b in blocks) / (width * height)
    assert used >= 0.8, (metrics.tile, used)
    tile = metrics.tile
    assert 0.34 <= tile.height() / tile.width() <= 1.25


# -- sorting ----------------------------------------------------------------------------


def test_orders_are_stable_and_put_unknown_last() -> None:
    facts = {
        "a": TileFacts(60.2, 10, 0), "b": TileFacts(71.0, 95, 0), "c": TileFacts(60.4, 0, 3),
        "d": TileFacts(None, None, 0), "e": TileFacts(45.0, 50, 2),
    }  # fmt: skip
    items = list(facts)
    assert ordered(items, facts.__getitem__, TileOrder.NODE) == items
    # 60.2 and 60.4 both show as 60 °C: they keep their order.
    assert ordered(items, facts.__getitem__, TileOrder.HOTTEST) == ["b", "a", "c", "e", "d"]
    assert ordered(items, facts.__getitem__, TileOrder.BUSIEST) == ["b", "e", "a", "c", "d"]
    assert ordered(items, facts.__getitem__, TileOrder.IDLE) == ["c", "a", "e", "b", "d"]
    assert ordered(items, facts.__getitem__, TileOrder.ALERTING) == ["c", "e", "b", "a", "d"]
    groups = ordered_groups([["a", "d"], ["e", "b"]], facts.__getitem__, TileOrder.HOTTEST)
    assert groups == [(1, ["b", "e"]), (0, ["a", "d"])]  # the group with the hottest first


def test_sorted_grid_shows_hottest_first_and_returns_to_node_order(qtbot) -> None:
    fleet = big_fleet(nodes=3)
    window_grid, _scroll = scrolled_grid(qtbot, fleet, 1200, 700)
    temps = {(n.target, g): n.value(g, TEMP_GPU_C) for n in fleet for g in range(n.gpu_count)}
    utils = {(n.target, g): n.value(g, UTIL_GPU_PCT) for n in fleet for g in range(n.gpu_count)}
    hottest = max(temps, key=lambda p: temps[p] or 0)
    idlest = min(utils, key=lambda p: utils[p] or 0)

    def first_place() -> tuple[str, int]:
        block = window_grid.blocks[0]
        node_row, gpu = block.group.members[0]
        return fleet.nodes()[node_row].target, gpu

    window_grid.set_order("hottest first")
    assert first_place() == hottest
    shown = [temps[(fleet.nodes()[r].target, g)] for r, g in window_grid.blocks[0].group.members]
    assert shown == sorted(shown, reverse=True)  # inside the block too
    window_grid.set_order(TileOrder.IDLE)
    assert first_place() == idlest
    window_grid.set_order(TileOrder.NODE)
    assert [b.group.members for b in window_grid.blocks] == [
        tuple((row, g) for g in range(8)) for row in range(3)
    ]


def test_sort_control_in_the_toolbar_sorts_the_grid(qtbot, open_window, start_daemon) -> None:
    window = four_nodes(qtbot, open_window, start_daemon)
    orders = [window.grid_part.sort_by.itemText(i) for i in range(window.grid_part.sort_by.count())]
    assert orders == ["node order", "hottest first", "busiest first", "idle first",
                      "alerting first"]  # fmt: skip
    window.grid_part.sort_by.setCurrentText("hottest first")
    assert window.grid.order is TileOrder.HOTTEST
    items = window.session.items

    def first_is_hottest() -> bool:
        node_row, gpu = window.grid.blocks[0].group.members[0]
        first = items.gpu_index(items.index(node_row, 0).data(roles.TARGET_ROLE), gpu)
        shown = round(window.session.fleet.nodes()[node_row].value(gpu, TEMP_GPU_C) or 0)
        hottest = max(round(n.value(g, TEMP_GPU_C) or 0) for n in window.session.fleet
                      for g in range(n.gpu_count))  # fmt: skip
        return first.isValid() and shown == hottest

    # Re-sorted as the data changes (once a second at most): it keeps holding.
    qtbot.waitUntil(first_is_hottest, timeout=10_000)


# -- labels -----------------------------------------------------------------------------


def test_grouped_labels_keep_the_node_and_shorten_from_the_middle() -> None:
    job = Group("Slurm job 4242", None, ((0, 1),), "4242", "Slurm job")
    assert tile_labels(job, "gpu-node-03", 1) == ("job 4242 · gpu-node-03:1", "gpu-node-03:1")
    node = Group("gpu-node-03", 0, ((0, 1),))
    assert tile_labels(node, "gpu-node-03", 1) == ("GPU 1",)
    painter = TilePainter()
    assert painter.label_text(tile_labels(job, "gpu-node-03", 1), 400) == (
        "job 4242 · gpu-node-03:1"
    )
    short = painter.label_text(tile_labels(job, "gpu-node-03", 1), 60)
    assert short != "gpu-node-03:1" and "…" in short  # too narrow even for the node:index
    assert short.startswith("gpu") and short.endswith(":1"), short  # its ends stay
    mid = painter.label_text(tile_labels(job, "gpu-node-03", 1), _width("gpu-node-03:1") + 2)
    assert mid == "gpu-node-03:1"  # the job goes first (the block's title names it)


def _width(text: str) -> int:
    """The width of `text` in a full tile's label font (8 pt)."""
    font = QFont()
    font.setPointSizeF(8)
    return QFontMetrics(font).horizontalAdvance(text)


def test_group_by_job_in_the_window_labels_tiles_with_their_node(
    qtbot, open_window, start_daemon
) -> None:
    slurm_node = start_daemon(gpus=8, seed=0, hostname="gpu-node-07")  # even seeds: Slurm
    window = open_window(str(slurm_node.address))
    wait_connected(qtbot, window, str(slurm_node.address))
    window.grid_part.group_by.setCurrentText("Slurm job")
    jobs = [b for b in window.grid.blocks if b.group.key]
    assert jobs, "the Slurm node's jobs are groups"
    block = jobs[0]
    labels = tile_labels(block.group, "gpu-node-07", block.group.members[0][1])
    assert labels[0] == f"job {block.group.key} · gpu-node-07:{block.group.members[0][1]}"
    # The tile shows it: light label pixels in its top-left corner.
    image = window.grid.grab(block.tiles[0]).toImage()
    assert any(image.pixelColor(x, y).lightness() > 200 for x in range(4, 40)
               for y in range(3, 14)), "a label is drawn"  # fmt: skip


def test_a_large_fleet_is_added_in_one_insertion(qtbot) -> None:
    """1,250 nodes added one row at a time cost a starting console 1.2 s of views
    following each insertion; the session adds its nodes in one."""
    items = FleetItemModel(FleetModel())
    inserted: list[tuple[int, int]] = []
    items.rowsInserted.connect(lambda _parent, first, last: inserted.append((first, last)))
    targets = [f"10.0.{i // 250}.{i % 250}:50051" for i in range(1250)]
    items.add_nodes([*targets, targets[0]])  # a repeat is one node
    assert inserted == [(0, 1249)]
    items.add_nodes(targets[:10])  # all known: nothing to insert
    items.add_node("10.9.9.9:50051")
    assert inserted == [(0, 1249), (1250, 1250)]
    assert items.rowCount() == 1251
