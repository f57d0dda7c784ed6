"""FleetGrid: every GPU of the fleet as a tile, grouped by node (or Slurm job, or container).

One painted widget (not a widget per tile) keeps 1,000 tiles cheap: only the
blocks in the exposed rectangle are painted, once per frame at most.

Tiles are drop targets: a queued workload (assign) or a user or team (reserve).
While a drag hovers, the tiles it would use are outlined green or red and the
verdict — what the drop will do, or why it is refused — is shown beside the
tile. Ctrl+click adds tiles to the selection; a holder dropped on a selected
tile reserves the whole selection.

Keyboard: the arrows move a focus ring between tiles (console.views.grid.grid_keys),
Enter selects the ringed tile as a click does, Space adds it to the selection or
takes it out, and the Menu key or Shift+F10 opens its context menu beside it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from PySide6.QtCore import QEvent, QMimeData, QModelIndex, QPoint, QRect, QSize, Qt, Signal
from PySide6.QtGui import (
    QContextMenuEvent,
    QDrag,
    QDragEnterEvent,
    QDragLeaveEvent,
    QDragMoveEvent,
    QDropEvent,
    QFocusEvent,
    QHelpEvent,
    QKeyEvent,
    QMouseEvent,
    QPainter,
    QPaintEvent,
    QPixmap,
    QResizeEvent,
)
from PySide6.QtWidgets import QApplication, QMenu, QScrollArea, QSizePolicy, QToolTip, QWidget

from console.fleet import columns
from console.fleet.health_words import condition_tooltip
from console.fleet.placement import Place
from console.fleet.staleness import Quiet
from console.fleet.tile_order import TileFacts, TileOrder, ordered_groups
from console.fleet.updates import LinkState
from console.fleet.wall_clock import unix_now_ms
from console.qt import roles
from console.qt.drop_rules import TileDrop, TileDropRules
from console.qt.fleet_item_model import FleetItemModel
from console.qt.frame_pump import DEFAULT_FPS
from console.qt.mime import drag_text, node_mime
from console.qt.named_timer import named_timer
from console.views.common.drag_image import OFFSET, drag_pixmap
from console.views.common.drop_zone import answer_drag
from console.views.grid import grid_keys
from console.views.grid.drop_overlay import paint_drop_verdict
from console.views.grid.grid_layout import (
    DEFAULT,
    Block,
    Group,
    Member,
    Metrics,
    fit,
    lay_out,
    node_groups,
    placement_groups,
    tile_labels,
)
from console.views.grid.tile_menu import tile_menu
from console.views.grid.tile_painter import TilePainter
from gpufleet.v1.alert_severity import Severity
from gpufleet.v1.gpu_metrics import TEMP_GPU_C, UTIL_GPU_PCT, ColourScale

# A sorted grid re-sorts at most this often: tiles that move faster than a person can
# follow them cannot be read or clicked (and each re-sort lays out the whole fleet).
SORT_MS = 1000
# A frame repaints at least this many changed blocks (nodes), and more while the blocks
# measured lately fit in PAINT_BUDGET_S; the rest wait a frame, oldest first. 125 nodes at
# 1 Hz and 20 frames a second change ~6 a frame; when all change together (a reconnect, a
# stall caught up, the replay cursor moved) a fixed 16 a frame left a moved cursor's
# picture half old for eight frames (400 ms of bench/replay_fleet.py's 705 ms median
# move); one frame of all of them is one long frame (a compact block paints in ~0.2 ms, a
# full one in up to ~2 ms, more on a loaded machine).
REPAINT_BUDGET = 16
PAINT_BUDGET_S = 0.012
BLOCK_PAINT_S = 0.001  # a block's paint time until one is measured (16 fit the budget)
MEASURE_WEIGHT = 0.2  # of each paint's measure in the running estimate
FRAME_MS = 1000 // DEFAULT_FPS
ALERT_RANK = {None: 0, Severity.INFO: 1, Severity.WARNING: 2, Severity.CRITICAL: 3}


class FleetGrid(QWidget):
    """Tiles coloured by temperature (or utilisation); click one to select it."""

    gpuSelected = Signal(str, int)
    # Drops the rules accepted: the action goes out from whoever listens.
    workloadDropped = Signal(object, object)  # WorkloadRow, Verdict (its GPUs)
    holderDropped = Signal(str, object)  # holder, Verdict (its GPUs)
    slurmJobDropped = Signal(object)  # SlurmSteer: a pending Slurm job to the tile's node
    slurmHolderDropped = Signal(object)  # SlurmReserve: a holder on Slurm nodes
    # A verdict while hovering, or why a drop was refused: for the status bar.
    dropHint = Signal(str)
    releaseRequested = Signal(object, int)  # ReservationRow, the tile's GPU (from its menu)
    cancelRequested = Signal(object)  # WorkloadRow, from a tile's context menu
    drainRequested = Signal(str, int, bool)  # target, GPU, drain (False: return to placement)
    clearHealthRequested = Signal(str, int)  # target, GPU: "Mark repaired (clear health)…"
    # The keyboard's way to what a drop does: choose a workload or a holder for this tile.
    assignHereRequested = Signal(str, int)  # target, GPU: "Assign a queued workload here…"
    reserveHereRequested = Signal(str, int)  # target, GPU: "Reserve for…"

    def __init__(
        self,
        model: FleetItemModel,
        drop_rules: TileDropRules | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("fleetGrid")
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)  # Tab reaches the grid too
        self._model = model
        self._painter = TilePainter(model.data)
        self._blocks: list[Block] = []
        self._where: dict[Member, tuple[int, int]] = {}  # member -> (block, tile)
        # Each GPU's item index, made once per layout: making one costs more than
        # painting a compact tile (the model's structure changes only with a relayout).
        self._indexes: dict[Member, QModelIndex] = {}
        self._grouping = "node"
        self._order = TileOrder.NODE
        self._selected: tuple[str, int] | None = None
        self._selection: set[Place] = set()  # Ctrl+click adds; a plain click starts over
        self._focus: Place | None = None  # the tile the arrow keys are on
        self.offers_placement = False  # menus add Assign/Reserve (set where someone answers)
        # More entries for a tile's menu (menu, target, GPU): Slurm's drain and resume.
        self.menu_extras: list[Callable[[QMenu, str, int], None]] = []
        self._rules = drop_rules
        self._hover: tuple[Place, TileDrop] | None = None
        self._drag_from: tuple[QPoint, str] | None = None  # a press on a node's title line
        self.last_drop: TileDrop | None = None  # the verdict on the latest drop
        self.setAcceptDrops(drop_rules is not None)
        # Changed blocks waiting for their repaint (an ordered set: oldest first).
        self._dirty: dict[int, None] = {}
        self._yielded = False  # the waiting blocks left their frame to another view
        # ...and they have not been repainted since: they leave no second frame in a row
        # (the plots refreshing every frame, as they do while Play runs, starved the grid).
        self._postponed = False
        self._block_paint_s = BLOCK_PAINT_S  # a block's paint time, as measured lately
        self._repaint = named_timer(
            self, "gpufleet-grid-repaint", self._on_repaint_timeout, single_shot=True
        )
        # Regrouping by job follows the data, once per frame at most; re-sorting once a SORT_MS.
        self._regroup = named_timer(self, "gpufleet-grid-regroup", self._relayout, single_shot=True)
        self._resort = named_timer(self, "gpufleet-grid-resort", self._relayout, single_shot=True)
        # Wire the model once: structure changes relayout, data changes repaint.
        model.modelReset.connect(self._on_model_structure_changed)
        model.rowsInserted.connect(self._on_model_structure_changed)
        model.nodesChanged.connect(self._on_nodes_changed)
        self._relayout()

    # -- layout ----------------------------------------------------------------

    def _on_model_structure_changed(self, *_args: object) -> None:
        self._indexes = {}  # made against rows that may have moved
        self._relayout()

    def _relayout(self) -> None:
        if self._grouping == "node":
            groups = node_groups(self._model)
        else:
            groups = placement_groups(self._model, self._grouping)
        groups = self._sorted(groups)
        room = self._room()
        if room is None:  # on its own: the default tiles, as many rows as they need
            metrics, room = DEFAULT, QSize(self.width(), 0)
        else:
            metrics = fit([len(g.members) for g in groups], room.width(), room.height())
        self._painter.set_metrics(metrics)
        self._blocks, height = lay_out(groups, room.width(), metrics)
        self._where = {
            member: (b, t)
            for b, block in enumerate(self._blocks)
            for t, member in enumerate(block.group.members)
        }
        # Only a layout taller than the room holds the grid up (and the scroll area
        # scrolls); one that fits lets the grid follow the room as it shrinks.
        self.setMinimumHeight(height if height > room.height() else 0)
        self._dirty.clear()  # all of it repaints
        self.update()

    def _room(self) -> QSize | None:
        """The area the tiles fill: the scroll area's viewport; None outside a scroll area."""
        scroll = self._scroll_area()
        return scroll.viewport().size() if scroll is not None else None

    def _scroll_area(self) -> QScrollArea | None:
        viewport = self.parentWidget()
        scroll = viewport.parentWidget() if viewport is not None else None
        return scroll if isinstance(scroll, QScrollArea) and scroll.widget() is self else None

    def _sorted(self, groups: list[Group]) -> list[Group]:
        if self._order is TileOrder.NODE:
            return groups
        facts: dict[int, list[TileFacts]] = {}  # node row -> its GPUs' facts, read once
        for row in {r for g in groups for r, _ in g.members}:
            facts[row] = self._node_facts(row)
        ranked = ordered_groups([g.members for g in groups],
                                lambda m: facts[m[0]][m[1]], self._order)  # fmt: skip
        return [dataclasses.replace(groups[i], members=tuple(m)) for i, m in ranked]

    def _gpu_index(self, member: Member) -> QModelIndex:
        index = self._indexes.get(member)
        if index is None:
            node = self._model.index(member[0], 0)
            index = self._indexes[member] = self._model.index(member[1], 0, node)
        return index

    def _node_facts(self, row: int) -> list[TileFacts]:
        read = self._model.data
        found = []
        for gpu in range(self._model.rowCount(self._model.index(row, 0))):
            index = self._gpu_index((row, gpu))
            numbers = read(index, roles.METRIC_ROLE)
            found.append(TileFacts(
                columns.value(numbers, TEMP_GPU_C), columns.value(numbers, UTIL_GPU_PCT),
                ALERT_RANK[read(index, roles.ALERT_ROLE)],
            ))  # fmt: skip
        return found

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._relayout()

    def sizeHint(self) -> QSize:
        return QSize(2 * DEFAULT.block_width() + 3 * DEFAULT.block_gap, 400)

    def tile_rect(self, target: str, gpu: int) -> QRect | None:
        node = self._model.node_row(target)
        where = self._where.get((node, gpu)) if node is not None else None
        return self._blocks[where[0]].tiles[where[1]] if where else None

    def rects_of(self, target: str, gpu: int | None) -> list[QRect]:
        """Where a GPU's tile is, or with no GPU the whole node: its block (header and
        tiles) where the grid shows nodes, else each of its tiles. Empty: not laid out."""
        if gpu is not None:
            return [tile] if (tile := self.tile_rect(target, gpu)) is not None else []
        node = self._model.node_row(target)
        if node is None:
            return []
        blocks = [b.rect for b in self._blocks if b.group.node_row == node]
        return blocks or [self._blocks[b].tiles[t] for (row, _), (b, t) in self._where.items()
                          if row == node]  # fmt: skip

    # -- behaviour -------------------------------------------------------------

    def set_color_by(self, mode: str) -> None:
        """Colour tiles by a catalogue colour scale, by its name ("temperature")."""
        self._painter.color_by = ColourScale(mode)
        self.update()

    def set_grouping(self, grouping: str) -> None:
        self._grouping = grouping
        self._relayout()

    @property
    def grouping(self) -> str:
        return self._grouping

    def set_order(self, order: TileOrder | str) -> None:
        """Sort the tiles (TileOrder, or its text as the toolbar shows it); now, then again
        as the data changes, once a SORT_MS at most."""
        self._order = TileOrder(order)
        self._resort.stop()
        self._relayout()

    @property
    def order(self) -> TileOrder:
        return self._order

    @property
    def metrics(self) -> Metrics:
        """The current tile size and spacing (it follows the room the grid has)."""
        return self._painter.metrics

    @property
    def blocks(self) -> list[Block]:
        return list(self._blocks)

    @property
    def selected(self) -> tuple[str, int] | None:
        return self._selected

    @property
    def selection(self) -> frozenset[Place]:
        """Every selected tile (the one shown in the detail panel among them)."""
        return frozenset(self._selection)

    @property
    def hover(self) -> tuple[Place, TileDrop] | None:
        """The tile a drag hovers over and its verdict, while a drag is over the grid."""
        return self._hover

    def select(self, target: str, gpu: int, add: bool = False) -> None:
        """Select a tile; with `add`, toggle it in the selection instead of starting over."""
        place = (target, gpu)
        self._move_focus(place)
        if add and place in self._selection and len(self._selection) > 1:
            self._selection.discard(place)
            self.update()
            if self._selected == place:  # the detail panel shows another selected tile
                self._selected = min(self._selection)
                self.gpuSelected.emit(*self._selected)
            return
        if add:
            self._selection.add(place)
        else:
            self._selection = {place}
        self._selected = place
        self.update()
        self.gpuSelected.emit(target, gpu)

    def _on_nodes_changed(self, node_rows: list[int]) -> None:
        """The frame's changed nodes (FleetItemModel.nodesChanged): their blocks repaint."""
        if self._order is not TileOrder.NODE and not self._resort.isActive():
            self._resort.start(SORT_MS)
        if self._grouping != "node":
            if not self._regroup.isActive():
                self._regroup.start(0)
            return
        where, dirty = self._where, self._dirty
        for node_row in node_rows:
            found = where.get((node_row, 0))
            if found is not None:
                dirty[found[0]] = None
        if self._yielded or not self._repaint.isActive():
            # This frame, after every change the pump made (with those a yielded frame
            # left: this is the next frame's news).
            self._yielded = False
            self._repaint.start(0)

    def yield_frame(self) -> None:
        """Leave this frame to a heavier view: the blocks changed in it repaint with the
        next frame's changes (or a frame later, if none come). The GPU plots' refresh
        (once a second) and a grid repaint in one frame made the console's longest frames
        (docs/benchmarks.md). Called after the frame's changes reached the grid.
        Blocks that left the last frame repaint in this one whatever refreshes."""
        if self._repaint.isActive() and not self._postponed:
            self._yielded = self._postponed = True
            self._repaint.start(FRAME_MS)

    @property
    def blocks_waiting(self) -> int:
        """Changed blocks not repainted yet."""
        return len(self._dirty)

    @property
    def repaint_budget(self) -> int:
        """How many changed blocks the next frame repaints: as many as the blocks' paint
        time measured lately fits in PAINT_BUDGET_S, and never fewer than REPAINT_BUDGET."""
        return max(REPAINT_BUDGET, int(PAINT_BUDGET_S / self._block_paint_s))

    def _on_repaint_timeout(self) -> None:
        """Repaint the changed blocks, a repaint_budget a frame, oldest first."""
        self._yielded = self._postponed = False
        due = list(self._dirty)[: self.repaint_budget]
        for block in due:
            del self._dirty[block]
            if block < len(self._blocks):
                self.update(self._blocks[block].rect)
        if self._dirty:
            self._repaint.start(FRAME_MS)

    def mousePressEvent(self, event: QMouseEvent) -> None:
        point = event.position().toPoint()
        hit = self._hit(point)
        left = event.button() == Qt.MouseButton.LeftButton
        if hit is not None and left:
            add = bool(event.modifiers() & Qt.KeyboardModifier.ControlModifier)
            self.select(*hit, add=add)
        # A node drags from its block's title line (onto the Slurm drain zone).
        header = self.header_at(point) if left else None
        self._drag_from = (point, header) if header is not None else None

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        start = self._drag_from
        if start is None or not event.buttons() & Qt.MouseButton.LeftButton:
            return
        moved = (event.position().toPoint() - start[0]).manhattanLength()
        if moved >= QApplication.startDragDistance():
            self._drag_from = None
            self._start_node_drag(start[1])

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        self._drag_from = None
        super().mouseReleaseEvent(event)

    def header_at(self, point: QPoint) -> str | None:
        """The node whose block's title line is under `point`, or None."""
        for block in self._blocks:
            row = block.group.node_row
            head = QRect(block.rect.topLeft(), QSize(block.rect.width(), self.metrics.header_h))
            if row is not None and head.contains(point):
                target: str = self._model.index(row, 0).data(roles.TARGET_ROLE)
                return target
        return None

    def node_drag_data(self, target: str) -> QMimeData:
        """What dragging a node carries: its target and name."""
        return node_mime(target, self._model.node_index(target).data())

    def node_drag_label(self, data: QMimeData) -> QPixmap:
        """The drag's compact label ("node gpu01"), in the grid's palette."""
        return drag_pixmap(drag_text(data), self.palette(), self.font(), self.devicePixelRatioF())

    def _start_node_drag(self, target: str) -> None:
        drag = QDrag(self)  # Qt deletes it once the drag ends
        data = self.node_drag_data(target)
        drag.setMimeData(data)
        drag.setPixmap(self.node_drag_label(data))
        drag.setHotSpot(-OFFSET)
        drag.exec(Qt.DropAction.MoveAction)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        key, mods = event.key(), event.modifiers()
        if key == Qt.Key.Key_Escape and self._selected is not None:
            self._selection = {self._selected}  # back to the one tile shown in detail
            self.update()
            return
        spot = self._focus_spot()
        if spot is None:
            super().keyPressEvent(event)
            return
        ctrl = bool(mods & Qt.KeyboardModifier.ControlModifier)
        if key in grid_keys.MOVES:
            self._move_focus(self._place_at(grid_keys.move(self._blocks, spot, Qt.Key(key), ctrl)))
        elif key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            self.select(*self._place_at(spot))
        elif key == Qt.Key.Key_Space:
            self.select(*self._place_at(spot), add=True)
        elif key == Qt.Key.Key_Menu or (
            key == Qt.Key.Key_F10 and mods & Qt.KeyboardModifier.ShiftModifier
        ):
            self.popup_menu(*self._place_at(spot))
        else:
            super().keyPressEvent(event)

    @property
    def focus_tile(self) -> Place | None:
        """The tile the keyboard is on (ringed while the grid has focus)."""
        return self._focus

    def focusInEvent(self, event: QFocusEvent) -> None:
        super().focusInEvent(event)
        if self._focus_spot() is None:  # first visit: start on the selection, or the first tile
            first = grid_keys.first_spot(self._blocks)
            start = self._selected or (self._place_at(first) if first else None)
            if start is not None:
                self._move_focus(start)
        self._update_ring()

    def focusOutEvent(self, event: QFocusEvent) -> None:
        super().focusOutEvent(event)
        self._update_ring()

    def _focus_spot(self) -> grid_keys.Spot | None:
        if self._focus is None:
            return None
        node = self._model.node_row(self._focus[0])
        return self._where.get((node, self._focus[1])) if node is not None else None

    def _place_at(self, spot: grid_keys.Spot) -> Place:
        node_row, gpu = self._blocks[spot[0]].group.members[spot[1]]
        return self._model.index(node_row, 0).data(roles.TARGET_ROLE), gpu

    def _move_focus(self, place: Place) -> None:
        if place == self._focus:
            return
        self._update_ring()
        self._focus = place
        self._update_ring()
        tile = self.tile_rect(*place)
        viewport = self.parentWidget()
        scroll = viewport.parentWidget() if viewport is not None else None
        if tile is not None and isinstance(scroll, QScrollArea) and scroll.widget() is self:
            scroll.ensureVisible(tile.center().x(), tile.center().y(), 60, 60)

    def _update_ring(self) -> None:
        tile = self.tile_rect(*self._focus) if self._focus is not None else None
        if tile is not None:
            self.update(grid_keys.ring_area(tile))

    # -- tooltips --------------------------------------------------------------

    def event(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ToolTip and isinstance(event, QHelpEvent):
            text = self.tooltip_at(event.pos())
            if text:
                QToolTip.showText(event.globalPos(), text, self)
            else:
                QToolTip.hideText()
            return True
        return super().event(event)

    def tooltip_at(self, point: QPoint) -> str | None:
        """The node under `point` (its link, who we are on it), and the GPU if on a tile."""
        hit = self._hit(point)
        if hit is not None:
            node = self._model.node_index(hit[0])
            condition = self._model.gpu_index(*hit).data(roles.CONDITION_ROLE)
            health = condition_tooltip(condition, unix_now_ms()) if condition is not None else []
            return "\n".join([f"{node.data(Qt.ItemDataRole.ToolTipRole)}\nGPU {hit[1]}", *health])
        for block in self._blocks:
            if block.rect.contains(point) and block.group.node_row is not None:
                node = self._model.index(block.group.node_row, 0)
                return str(node.data(Qt.ItemDataRole.ToolTipRole))
        return None

    # -- context menu ----------------------------------------------------------

    def contextMenuEvent(self, event: QContextMenuEvent) -> None:
        if event.reason() == QContextMenuEvent.Reason.Keyboard:  # a platform's Menu key
            hit = self._place_at(spot) if (spot := self._focus_spot()) is not None else None
            if hit is not None:
                self.popup_menu(*hit)
            return
        hit = self._hit(event.pos())
        if hit is not None:
            self.popup_menu(*hit, event.globalPos())

    def popup_menu(self, target: str, gpu: int, at: QPoint | None = None) -> QMenu | None:
        """Open the tile's menu at `at` (global), or beside the tile for the keyboard."""
        menu = self.context_menu(target, gpu)
        if not menu.actions():
            menu.deleteLater()
            return None
        menu.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        tile = self.tile_rect(target, gpu)
        if at is None and tile is not None:
            at = self.mapToGlobal(tile.bottomLeft() + QPoint(0, 4))  # below: the tile shows
        menu.popup(at or self.mapToGlobal(QPoint(0, 0)))
        return menu

    def context_menu(self, target: str, gpu: int) -> QMenu:
        """Release the tile's reservation, cancel its workload, drain it, mark it repaired;
        and, where someone answers them, assign or reserve it (as a drop would)."""
        gpu_index = self._model.gpu_index(target, gpu)
        menu = tile_menu(
            self,
            gpu_index,
            self.releaseRequested.emit,
            self.cancelRequested.emit,
            self.drainRequested.emit,
            self.clearHealthRequested.emit,
        )
        if self.offers_placement and self._rules is not None:
            refusal: str | None = gpu_index.data(roles.OPERATOR_REFUSAL_ROLE)
            suffix = f" ({refusal})" if refusal else ""
            if not menu.isEmpty():
                menu.addSeparator()
            for text, signal in (("&Assign a queued workload here…", self.assignHereRequested),
                                 ("&Reserve for…", self.reserveHereRequested)):  # fmt: skip
                action = menu.addAction(text + suffix)
                action.setEnabled(refusal is None)
                action.triggered.connect(lambda _=False, s=signal: s.emit(target, gpu))
        for extra in self.menu_extras:
            extra(menu, target, gpu)
        return menu

    # -- drops -----------------------------------------------------------------

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if self._rules is not None and self._rules.carries(event.mimeData()):
            event.acceptProposedAction()  # follow the drag; each move gets a verdict
        else:
            event.ignore()

    def dragMoveEvent(self, event: QDragMoveEvent) -> None:
        drop = self._judge(event)
        answer_drag(event, drop is not None and drop.verdict.ok)

    def dragLeaveEvent(self, event: QDragLeaveEvent) -> None:
        self._set_hover(None)

    def dropEvent(self, event: QDropEvent) -> None:
        drop = self._judge(event)
        self._set_hover(None)
        if drop is None:
            event.ignore()
            return
        self.last_drop = drop
        if not drop.verdict.ok:
            event.ignore()
            self.dropHint.emit(f"Not dropped: {drop.verdict.reason}")
            return
        event.acceptProposedAction()
        if drop.workload is not None:
            self.workloadDropped.emit(drop.workload, drop.verdict)
        elif drop.holder is not None:
            self.holderDropped.emit(drop.holder, drop.verdict)
        elif drop.slurm_job is not None:
            self.slurmJobDropped.emit(drop.slurm_job)
        elif drop.slurm_reserve is not None:
            self.slurmHolderDropped.emit(drop.slurm_reserve)

    def _judge(self, event: QDragMoveEvent | QDropEvent) -> TileDrop | None:
        hit = self._hit(event.position().toPoint())
        if hit is None or self._rules is None:
            self._set_hover(None)
            return None
        drop = self._rules.judge(event.mimeData(), *hit, self._selection)
        self._set_hover((hit, drop))
        return drop

    def _set_hover(self, hover: tuple[Place, TileDrop] | None) -> None:
        if hover == self._hover:
            return
        was_hovering, self._hover = self._hover is not None, hover
        self.update()
        if hover is None and was_hovering:
            self.dropHint.emit("")  # the drag left: its verdict no longer holds
        if hover is not None:
            verdict = hover[1].verdict
            self.dropHint.emit(verdict.reason if verdict.ok else f"Cannot drop: {verdict.reason}")

    def _hit(self, point: QPoint) -> tuple[str, int] | None:
        for block in self._blocks:
            if block.rect.contains(point):
                for (node_row, gpu), tile in zip(block.group.members, block.tiles, strict=True):
                    if tile.contains(point):
                        return self._model.index(node_row, 0).data(roles.TARGET_ROLE), gpu
        return None

    # -- painting --------------------------------------------------------------

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        # Compact tiles are rectangles on whole pixels: antialiasing would only blur them.
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, not self.metrics.compact)
        region = event.region()
        bounds = region.boundingRect()
        started, painted = time.perf_counter(), 0
        for block in self._blocks:
            # Not the bounding box of all dirt: only the blocks in the region itself.
            if block.rect.intersects(bounds) and region.intersects(block.rect):
                self._paint_block(painter, block)
                painted += 1
        if painted:
            measured = (time.perf_counter() - started) / painted
            self._block_paint_s += MEASURE_WEIGHT * (measured - self._block_paint_s)
        if self._hover is not None:
            self._paint_hover(painter, *self._hover)
        painter.end()

    def _paint_hover(self, painter: QPainter, place: Place, drop: TileDrop) -> None:
        hovered = self.tile_rect(*place)
        if hovered is None:
            return
        rects = [r for p in drop.verdict.places if (r := self.tile_rect(*p)) is not None]
        paint_drop_verdict(painter, hovered, rects or [hovered], drop.verdict, self.rect())

    def _paint_block(self, painter: QPainter, block: Block) -> None:
        group = block.group
        read = self._model.data  # not index.data(): no trip through Qt's C++ and back
        if group.node_row is not None:
            node = self._model.index(group.node_row, 0)
            self._painter.block(painter, block.rect, read(node, roles.ALERT_ROLE))
            self._painter.node_header(painter, block.rect, node)
        else:
            self._painter.block(painter, block.rect, None)
            self._painter.group_header(painter, block.rect, group.title)
        nodes: dict[int, tuple[QModelIndex, str, str, tuple[LinkState, Quiet | None]]] = {}
        self._painter.begin_tiles(painter)
        for (node_row, gpu_row), tile in zip(group.members, block.tiles, strict=True):
            known = nodes.get(node_row)
            if known is None:  # what is the node's, read once per block
                node = self._model.index(node_row, 0)
                link = (read(node, roles.LINK_STATE_ROLE), read(node, roles.QUIET_ROLE))
                known = nodes[node_row] = (node, read(node), read(node, roles.TARGET_ROLE), link)
            node, name, target, link = known
            gpu = self._gpu_index((node_row, gpu_row))
            labels = tile_labels(group, name, gpu_row)
            place = (target, gpu_row)
            self._painter.tile(painter, gpu, tile, labels, place in self._selection, link)
            if place == self._focus and self.hasFocus():
                self._painter.focus_ring(painter, tile)
