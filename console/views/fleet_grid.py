"""FleetGrid: every GPU of the fleet as a tile, grouped by node, painted in one widget.

One painted widget (not a widget per tile) keeps 1,000 tiles cheap: only the
tiles in the exposed rectangle are painted, once per frame at most.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QModelIndex, QPoint, QRect, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QMouseEvent, QPainter, QPaintEvent, QPen, QResizeEvent
from PySide6.QtWidgets import QSizePolicy, QWidget

from console.fleet.alerts import Severity
from console.fleet.updates import LinkState
from console.qt import roles
from console.qt.fleet_item_model import FleetItemModel
from console.views.tile_colors import (
    LOST,
    TEMPERATURE_STOPS,
    UTILISATION_STOPS,
    scale_color,
)

TILE = QSize(104, 52)
GAP = 4
PAD = 8
HEADER_H = 24
COLUMNS = 4
BLOCK_GAP = 10
ALERT_COLORS = {
    Severity.CRITICAL: QColor("#ff3b3b"),
    Severity.WARNING: QColor("#f6c343"),
    Severity.INFO: QColor("#63b3ed"),
}
# Slurm states in which the node takes no new jobs: worth a word on the node's block.
UNAVAILABLE_SLURM_STATES = {"drained", "draining", "down", "fail", "failing", "maint", "reserved"}
_LINK_COLORS = {
    LinkState.CONNECTED: QColor("#48bb78"),
    LinkState.CONNECTING: QColor("#a0aec0"),
    LinkState.RECONNECTING: QColor("#ecc94b"),
    LinkState.UNREACHABLE: QColor("#f56565"),
}


@dataclass(frozen=True)
class NodeBlock:
    row: int
    rect: QRect
    tiles: tuple[QRect, ...]


class FleetGrid(QWidget):
    """Tiles coloured by temperature (or utilisation); click one to select it."""

    gpuSelected = Signal(str, int)

    def __init__(self, model: FleetItemModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("fleetGrid")
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        self._model = model
        self._blocks: list[NodeBlock] = []
        self._color_by = "temperature"
        self._selected: tuple[str, int] | None = None
        self._small_font, self._big_font = QFont(), QFont()
        self._small_font.setPointSizeF(8)
        self._big_font.setPointSizeF(10)
        self._big_font.setBold(True)
        # Wire the model once: structure changes relayout, data changes repaint.
        model.modelReset.connect(self._relayout)
        model.rowsInserted.connect(self._relayout)
        model.dataChanged.connect(self._on_model_data_changed)
        self._relayout()

    # -- layout ------------------------------------------------------------

    def block_width(self) -> int:
        return COLUMNS * TILE.width() + (COLUMNS - 1) * GAP + 2 * PAD

    def _relayout(self) -> None:
        per_row = max(1, (self.width() - BLOCK_GAP) // (self.block_width() + BLOCK_GAP))
        self._blocks, y, row_height, x_slot = [], BLOCK_GAP, 0, 0
        for row in range(self._model.rowCount()):
            gpus = self._model.rowCount(self._model.index(row, 0))
            height = HEADER_H + max(1, -(-gpus // COLUMNS)) * (TILE.height() + GAP) + PAD
            if x_slot == per_row:
                y, x_slot, row_height = y + row_height + BLOCK_GAP, 0, 0
            x = BLOCK_GAP + x_slot * (self.block_width() + BLOCK_GAP)
            self._blocks.append(self._block(row, QRect(x, y, self.block_width(), height), gpus))
            row_height, x_slot = max(row_height, height), x_slot + 1
        self.setMinimumHeight(y + row_height + BLOCK_GAP)
        self.update()

    def _block(self, row: int, rect: QRect, gpus: int) -> NodeBlock:
        tiles = []
        for gpu in range(gpus):
            col, line = gpu % COLUMNS, gpu // COLUMNS
            x = rect.x() + PAD + col * (TILE.width() + GAP)
            y = rect.y() + HEADER_H + line * (TILE.height() + GAP)
            tiles.append(QRect(QPoint(x, y), TILE))
        return NodeBlock(row, rect, tuple(tiles))

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._relayout()

    def sizeHint(self) -> QSize:
        return QSize(2 * self.block_width() + 3 * BLOCK_GAP, 400)

    def tile_rect(self, target: str, gpu: int) -> QRect | None:
        for block in self._blocks:
            if self._model.index(block.row, 0).data(roles.TARGET_ROLE) == target:
                return block.tiles[gpu] if gpu < len(block.tiles) else None
        return None

    # -- behaviour -----------------------------------------------------------

    def set_color_by(self, mode: str) -> None:
        self._color_by = mode
        self.update()

    @property
    def selected(self) -> tuple[str, int] | None:
        return self._selected

    def select(self, target: str, gpu: int) -> None:
        self._selected = (target, gpu)
        self.update()
        self.gpuSelected.emit(target, gpu)

    def _on_model_data_changed(self, top_left: QModelIndex, _bottom_right: QModelIndex) -> None:
        node_row = top_left.row() if not top_left.parent().isValid() else top_left.parent().row()
        if node_row < len(self._blocks):
            self.update(self._blocks[node_row].rect)

    def mousePressEvent(self, event: QMouseEvent) -> None:
        hit = self._hit(event.position().toPoint())
        if hit is not None:
            self.select(*hit)

    def _hit(self, point: QPoint) -> tuple[str, int] | None:
        for block in self._blocks:
            if block.rect.contains(point):
                for gpu, tile in enumerate(block.tiles):
                    if tile.contains(point):
                        return self._model.index(block.row, 0).data(roles.TARGET_ROLE), gpu
        return None

    # -- painting ------------------------------------------------------------

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        for block in self._blocks:
            if block.rect.intersects(event.rect()):
                self._paint_block(painter, block)
        painter.end()

    def _paint_block(self, painter: QPainter, block: NodeBlock) -> None:
        node = self._model.index(block.row, 0)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor("#262a31"))
        painter.drawRoundedRect(block.rect, 6, 6)
        state = node.data(roles.LINK_STATE_ROLE)
        node_alert = node.data(roles.ALERT_ROLE)
        if node_alert is not None:
            painter.setPen(QPen(ALERT_COLORS[node_alert], 2))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRoundedRect(block.rect.adjusted(1, 1, -1, -1), 6, 6)
            painter.setPen(Qt.PenStyle.NoPen)
        dot = QRect(block.rect.x() + PAD, block.rect.y() + 8, 9, 9)
        painter.setBrush(_LINK_COLORS.get(state, QColor("#a0aec0")))
        painter.drawEllipse(dot)
        painter.setPen(QColor("#e2e8f0"))
        painter.setFont(self._big_font)
        header = QRect(dot.right() + 6, block.rect.y() + 3, block.rect.width() - 40, 18)
        model_name = (node.data(roles.MODEL_NAME_ROLE) or "").removeprefix("NVIDIA ")
        status = "" if state is LinkState.CONNECTED else f"  [{state.value}]"
        painter.drawText(
            header, Qt.AlignmentFlag.AlignVCenter, f"{node.data()}  {model_name}{status}"
        )
        for gpu, tile in enumerate(block.tiles):
            self._paint_tile(painter, self._model.index(gpu, 0, node), tile, state)

    def _paint_slurm(
        self, painter: QPainter, block: NodeBlock, slurm: tuple[str, str | None] | None
    ) -> None:
        """Slurm's word on the node, right-aligned in the header: DRAINED (reason)."""
        if slurm is None or slurm[0] not in UNAVAILABLE_SLURM_STATES:
            return
        state, reason = slurm
        text = state.upper() + (f": {reason}" if reason else "")
        painter.setPen(QColor("#f6ad55"))
        painter.setFont(self._small_font)
        area = QRect(block.rect.x() + PAD, block.rect.y() + 3, block.rect.width() - 2 * PAD, 18)
        elided = painter.fontMetrics().elidedText(text, Qt.TextElideMode.ElideRight, 200)
        painter.drawText(area, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, elided)

    def _paint_alert(self, painter: QPainter, tile: QRect, severity: Severity | None) -> None:
        """A thick coloured frame and a "!" badge: a critical GPU is impossible to miss."""
        if severity is None:
            return
        color = ALERT_COLORS[severity]
        painter.setPen(QPen(color, 4 if severity is Severity.CRITICAL else 2))
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawRoundedRect(tile.adjusted(2, 2, -2, -2), 4, 4)
        badge = QRect(tile.center().x() - 8, tile.center().y() - 8, 16, 16)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(color)
        painter.drawEllipse(badge)
        painter.setPen(QColor("#ffffff"))
        painter.setFont(self._big_font)
        painter.drawText(badge, Qt.AlignmentFlag.AlignCenter, "!")

    def _paint_tile(self, painter: QPainter, gpu: QModelIndex, tile: QRect, link: object) -> None:
        health, temp, util = (
            gpu.data(roles.HEALTH_ROLE),
            gpu.data(roles.TEMP_ROLE),
            gpu.data(roles.UTIL_ROLE),
        )
        if health == "lost":
            fill = LOST
        elif self._color_by == "utilisation":
            fill = scale_color(util, UTILISATION_STOPS)
        else:
            fill = scale_color(temp, TEMPERATURE_STOPS)
        if link is not LinkState.CONNECTED:
            fill = fill.darker(180)  # stale: the node is not streaming right now
        selected = self._selected == (gpu.data(roles.TARGET_ROLE), gpu.row())
        painter.setPen(QPen(QColor("#ffffff"), 2) if selected else Qt.PenStyle.NoPen)
        painter.setBrush(fill)
        painter.drawRoundedRect(tile.adjusted(1, 1, -1, -1), 4, 4)
        self._paint_alert(painter, tile, gpu.data(roles.ALERT_ROLE))
        painter.setPen(QColor("#f7fafc"))
        inner = tile.adjusted(6, 3, -6, -3)
        painter.setFont(self._small_font)
        painter.drawText(inner, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop, gpu.data())
        if health == "lost":
            painter.setFont(self._big_font)
            painter.drawText(inner, Qt.AlignmentFlag.AlignCenter, "LOST")
            return
        painter.setFont(self._big_font)
        temp_text = "n/a" if temp is None else f"{temp:.0f}°C"
        painter.drawText(inner, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignTop, temp_text)
        painter.setFont(self._small_font)
        used, total = gpu.data(roles.MEM_ROLE) or (None, None)
        bottom = Qt.AlignmentFlag.AlignBottom
        util_text = "util n/a" if util is None else f"{util:.0f}%"
        painter.drawText(inner, bottom | Qt.AlignmentFlag.AlignLeft, util_text)
        if used is not None and total:
            mem_text = f"{used / 1024**3:.0f}/{total / 1024**3:.0f}G"
            painter.drawText(inner, bottom | Qt.AlignmentFlag.AlignRight, mem_text)
