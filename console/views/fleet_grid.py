"""FleetGrid: every GPU of the fleet as a tile, grouped by node (or Slurm job, or container).

One painted widget (not a widget per tile) keeps 1,000 tiles cheap: only the
blocks in the exposed rectangle are painted, once per frame at most.
"""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, QPoint, QRect, QSize, QTimer, Signal
from PySide6.QtGui import QMouseEvent, QPainter, QPaintEvent, QResizeEvent
from PySide6.QtWidgets import QSizePolicy, QWidget

from console.qt import roles
from console.qt.fleet_item_model import FleetItemModel
from console.views.grid_layout import (
    BLOCK_GAP,
    Block,
    Member,
    block_width,
    lay_out,
    node_groups,
    placement_groups,
)
from console.views.tile_painter import TilePainter


class FleetGrid(QWidget):
    """Tiles coloured by temperature (or utilisation); click one to select it."""

    gpuSelected = Signal(str, int)

    def __init__(self, model: FleetItemModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("fleetGrid")
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        self._model = model
        self._painter = TilePainter()
        self._blocks: list[Block] = []
        self._where: dict[Member, tuple[int, int]] = {}  # member -> (block, tile)
        self._grouping = "node"
        self._selected: tuple[str, int] | None = None
        # Regrouping by job follows the data; once per frame at most.
        self._regroup = QTimer(self)
        self._regroup.setObjectName("gpufleet-grid-regroup")
        self._regroup.setSingleShot(True)
        self._regroup.timeout.connect(self._relayout)
        # Wire the model once: structure changes relayout, data changes repaint.
        model.modelReset.connect(self._relayout)
        model.rowsInserted.connect(self._relayout)
        model.dataChanged.connect(self._on_model_data_changed)
        self._relayout()

    # -- layout ----------------------------------------------------------------

    def _relayout(self) -> None:
        if self._grouping == "node":
            groups = node_groups(self._model)
        else:
            groups = placement_groups(self._model, self._grouping)
        self._blocks, height = lay_out(groups, self.width())
        self._where = {
            member: (b, t)
            for b, block in enumerate(self._blocks)
            for t, member in enumerate(block.group.members)
        }
        self.setMinimumHeight(height)
        self.update()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._relayout()

    def sizeHint(self) -> QSize:
        return QSize(2 * block_width() + 3 * BLOCK_GAP, 400)

    def tile_rect(self, target: str, gpu: int) -> QRect | None:
        node = self._model.node_row(target)
        where = self._where.get((node, gpu)) if node is not None else None
        return self._blocks[where[0]].tiles[where[1]] if where else None

    # -- behaviour -------------------------------------------------------------

    def set_color_by(self, mode: str) -> None:
        self._painter.color_by = mode
        self.update()

    def set_grouping(self, grouping: str) -> None:
        self._grouping = grouping
        self._relayout()

    @property
    def grouping(self) -> str:
        return self._grouping

    @property
    def blocks(self) -> list[Block]:
        return list(self._blocks)

    @property
    def selected(self) -> tuple[str, int] | None:
        return self._selected

    def select(self, target: str, gpu: int) -> None:
        self._selected = (target, gpu)
        self.update()
        self.gpuSelected.emit(target, gpu)

    def _on_model_data_changed(self, top_left: QModelIndex, _bottom_right: QModelIndex) -> None:
        if self._grouping != "node":
            if not self._regroup.isActive():
                self._regroup.start(0)
            return
        node_row = top_left.row() if not top_left.parent().isValid() else top_left.parent().row()
        where = self._where.get((node_row, 0))
        if where is not None:
            self.update(self._blocks[where[0]].rect)

    def mousePressEvent(self, event: QMouseEvent) -> None:
        hit = self._hit(event.position().toPoint())
        if hit is not None:
            self.select(*hit)

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
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        for block in self._blocks:
            if block.rect.intersects(event.rect()):
                self._paint_block(painter, block)
        painter.end()

    def _paint_block(self, painter: QPainter, block: Block) -> None:
        group = block.group
        if group.node_row is not None:
            node = self._model.index(group.node_row, 0)
            self._painter.block(painter, block.rect, node.data(roles.ALERT_ROLE))
            self._painter.node_header(painter, block.rect, node)
        else:
            self._painter.block(painter, block.rect, None)
            self._painter.group_header(painter, block.rect, group.title)
        for (node_row, gpu_row), tile in zip(group.members, block.tiles, strict=True):
            node = self._model.index(node_row, 0)
            gpu = self._model.index(gpu_row, 0, node)
            label = f"GPU {gpu_row}" if group.node_row is not None else f"{node.data()} · {gpu_row}"
            selected = self._selected == (node.data(roles.TARGET_ROLE), gpu_row)
            self._painter.tile(painter, gpu, tile, label, selected)
