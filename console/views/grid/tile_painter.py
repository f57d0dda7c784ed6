"""TilePainter: how a GPU tile and a block header look. Reads item data, paints, nothing else."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QModelIndex, QPoint, QRect, QSize, Qt
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetrics, QPainter, QPen, QStaticText

from console.fleet.columns import Row, coloured_by, value
from console.fleet.durations import duration_text
from console.fleet.health import GpuCondition, HealthState
from console.fleet.health_words import tile_tag
from console.fleet.staleness import Quiet
from console.fleet.updates import LinkState
from console.qt import roles
from console.views.grid.compact_tile import CompactStyle, CompactTile
from console.views.grid.grid_layout import DEFAULT, Metrics
from console.views.grid.tile_colors import LOST, STOPS, scale_color
from gpufleet.v1.alert_severity import Severity
from gpufleet.v1.gpu_metrics import (
    MEM_TOTAL_BYTES,
    MEM_USED_BYTES,
    TEMP_GPU_C,
    UTIL_GPU_PCT,
    ColourScale,
    GpuMetric,
)

ALERT_COLORS = {
    Severity.CRITICAL: QColor("#ff3b3b"),
    Severity.WARNING: QColor("#f6c343"),
    Severity.INFO: QColor("#63b3ed"),
}
# Slurm states in which the node takes no new jobs: worth a word on the node's block.
UNAVAILABLE_SLURM_STATES = {"drained", "draining", "down", "fail", "failing", "maint", "reserved"}
LINK_COLORS = {
    LinkState.CONNECTED: QColor("#48bb78"),
    LinkState.CONNECTING: QColor("#a0aec0"),
    LinkState.RECONNECTING: QColor("#ecc94b"),
    LinkState.UNREACHABLE: QColor("#f56565"),
    LinkState.DENIED: QColor("#ed64a6"),  # the node refused our credentials
}
BLOCK_FILL = QColor("#262a31")
TEXT = QColor("#f7fafc")
# A stale tile (its node sent nothing within its deadline): grey, its numbers dimmed.
STALE_FILL = QColor("#4a5059")
STALE_TEXT = QColor("#cbd5e0")  # dimmer than TEXT, still 5.5:1 on STALE_FILL (was 3.6:1)
NOT_RESPONDING = QColor("#ff3b3b")
RESERVED = QColor("#d6bcfa")  # the lock and the stripe of a reserved GPU
# Text on any tile fill needs 4.5:1 (tests/console/test_text_contrast.py): the holder's
# name and a running workload's are tinted white, no longer lilac (3.0:1) or green (3.4:1).
RESERVED_TEXT = QColor("#f5f1ff")
RUNNING_TEXT = QColor("#dcfce8")
FOCUS_RING = QColor("#00e5ff")  # the tile the arrow keys are on
# Health tags: (fill, border, text). Needs reset/reboot/inspection is a solid magenta
# chip (apart from the alert frame's red and yellow); degraded or suspect an amber
# outline; drained alone a grey one. Drained tiles are also hatched.
HEALTH_SERIOUS = QColor("#bf3a82")  # white on it 5.1:1 (#d53f8c was 4.3:1)
HEALTH_WATCH = QColor("#f6ad55")
HEALTH_STYLES = {
    "serious": (HEALTH_SERIOUS, QColor("#fed7e2"), QColor("#ffffff")),
    "watch": (QColor("#1a202c"), HEALTH_WATCH, HEALTH_WATCH),
    "drained": (QColor("#1a202c"), QColor("#cbd5e0"), QColor("#e2e8f0")),
}
DRAINED_HATCH = QBrush(QColor(255, 255, 255, 70), Qt.BrushStyle.BDiagPattern)


BADGE, BADGE_GAP = 16, 4  # the alert's "!" disc (px) and its gap to a lost tile's word
WALL_BADGE = 28  # the disc on a wall's tiles, read from across the room


def badge_size(metrics: Metrics) -> int:
    """The alert disc's diameter for tiles of `metrics` (its "!" is sized to fit it)."""
    return WALL_BADGE if metrics.wall else BADGE


LOST_WORD = "LOST"

# Type sizes (pt) by tile size: (small, big). Large tiles are for big screens, few nodes.
FONT_SIZES = {"compact": (7.0, 8.0), "full": (8.0, 10.0), "large": (10.0, 14.0),
              "wall": (14.0, 24.0)}  # fmt: skip
HEADER_MOST_PT = 14.0  # a block's title line is FULL_SPACING's 24 px high at every size


def _index_data(index: QModelIndex, role: int) -> Any:
    return index.data(role)


class TilePainter:
    def __init__(self, read: Callable[[QModelIndex, int], Any] = _index_data) -> None:
        """`read`: how to read item data; the model's own `data` spares every read a trip
        through Qt's C++ and back (a tile reads one role, TILE_ROLE; 1,000 tiles a frame)."""
        self.read = read
        self.small, self.big = QFont(), QFont()
        self.big.setBold(True)
        self.tag_font = QFont(self.small)
        self.tag_font.setBold(True)
        self.header_font = QFont(self.big)
        self.badge_font = QFont(self.big)  # the "!" inside the disc, never larger than it
        self.badge = BADGE
        self.badge_font.setPixelSize(BADGE * 3 // 4)
        self._tag_widths: dict[str, int] = {}
        # Figures are few and repeat ("71°C", "45%"): laid out once, not on every paint.
        self._texts: dict[tuple[bool, str], QStaticText] = {}
        self._fills: dict[tuple[ColourScale, int], QColor] = {}
        self._labels: dict[tuple[tuple[str, ...], int], str] = {}
        self.color_by = ColourScale.TEMPERATURE
        self.metrics = DEFAULT
        self._headers: dict[tuple[str, int, bool], str] = {}
        self.compact = CompactTile(self, CompactStyle(
            ALERT_COLORS, STALE_FILL, TEXT, RESERVED,
            _mark_color,
        ))  # fmt: skip
        self.set_metrics(DEFAULT)

    def set_metrics(self, metrics: Metrics) -> None:
        """Follow the layout's tile size: the type size and what a tile has room for."""
        self.metrics = metrics
        tier = ("compact" if metrics.compact else "wall" if metrics.wall
                else "large" if metrics.large else "full")  # fmt: skip
        small, big = FONT_SIZES[tier]
        if self.small.pointSizeF() != small or self.big.pointSizeF() != big:
            self.small.setPointSizeF(small)
            self.big.setPointSizeF(big)
            self.tag_font.setPointSizeF(small)
            self.header_font.setPointSizeF(min(big, HEADER_MOST_PT))
            self.badge = badge_size(metrics)
            self.badge_font.setPixelSize(self.badge * 3 // 4)
            self._tag_widths.clear()
            self._texts.clear()
            self._labels.clear()
            self._headers.clear()  # elided in the old type size
            self.compact.forget_figures()

    # -- blocks ----------------------------------------------------------------

    def block(self, painter: QPainter, rect: QRect, alert: Severity | None) -> None:
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(BLOCK_FILL)
        painter.drawRoundedRect(rect, 6, 6)
        if alert is not None:
            painter.setPen(QPen(ALERT_COLORS[alert], 2))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRoundedRect(rect.adjusted(1, 1, -1, -1), 6, 6)

    def node_header(self, painter: QPainter, rect: QRect, node: QModelIndex) -> None:
        state = self.read(node, roles.LINK_STATE_ROLE)
        size = 7 if self.metrics.compact else 9
        dot = QRect(rect.x() + self.metrics.pad, rect.y() + (self.metrics.header_h - size) // 2,
                    size, size)  # fmt: skip
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(LINK_COLORS.get(state, QColor("#a0aec0")))
        quiet: Quiet | None = self.read(node, roles.QUIET_ROLE)
        if quiet is not None and quiet.not_responding:
            painter.setBrush(NOT_RESPONDING)
        painter.drawEllipse(dot)
        model_name = ""  # a compact block has room for the node's name only
        if not self.metrics.compact:
            model_name = (self.read(node, roles.MODEL_NAME_ROLE) or "").removeprefix("NVIDIA ")
        if quiet is not None and quiet.not_responding:
            model_name = ""  # room for what matters more: "not responding: no data 7 s"
        status = _node_status(state, quiet)
        name = self.read(node, Qt.ItemDataRole.DisplayRole)
        self._header_text(painter, rect, dot.right() + 6, f"{name}  {model_name}{status}")
        self._slurm(painter, rect, self.read(node, roles.SLURM_ROLE))

    def group_header(self, painter: QPainter, rect: QRect, title: str) -> None:
        self._header_text(painter, rect, rect.x() + self.metrics.pad, title)

    def _header_text(self, painter: QPainter, rect: QRect, x: int, text: str) -> None:
        painter.setPen(QColor("#e2e8f0"))
        painter.setFont(self.small if self.metrics.compact else self.header_font)
        area = QRect(x, rect.y() + 1, rect.right() - x - self.metrics.pad, self.metrics.header_h)
        key = (text, area.width(), self.metrics.compact)
        elided = self._headers.get(key)
        if elided is None:  # a header's text changes seldom; measuring it is not cheap
            if len(self._headers) > 4096:
                self._headers.clear()
            elided = self._headers[key] = painter.fontMetrics().elidedText(
                text, Qt.TextElideMode.ElideMiddle, area.width()
            )
        painter.drawText(area, Qt.AlignmentFlag.AlignVCenter, elided)

    def _slurm(self, painter: QPainter, rect: QRect, slurm: tuple[str, str | None] | None) -> None:
        """Slurm's word on the node, right-aligned in the header: DRAINED: reason."""
        if slurm is None or slurm[0] not in UNAVAILABLE_SLURM_STATES:
            return
        text = slurm[0].upper() + (f": {slurm[1]}" if slurm[1] else "")
        painter.setPen(QColor("#f6ad55"))
        painter.setFont(self.small)
        pad = self.metrics.pad
        area = QRect(rect.x() + pad, rect.y() + 1, rect.width() - 2 * pad, self.metrics.header_h)
        room = min(200, area.width() // 2)
        elided = painter.fontMetrics().elidedText(text, Qt.TextElideMode.ElideRight, room)
        painter.drawText(area, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, elided)

    # -- tiles -----------------------------------------------------------------

    @property
    def colour_metric(self) -> GpuMetric[Any]:
        return coloured_by(self.color_by)

    def begin_tiles(self, painter: QPainter) -> None:
        """Before a block's tiles (after its header)."""
        if self.metrics.compact:
            self.compact.begin(painter)

    def tile(
        self,
        painter: QPainter,
        gpu: QModelIndex,
        tile: QRect,
        label: str | tuple[str, ...],
        selected: bool,
        link: tuple[LinkState, Quiet | None] | None = None,
    ) -> None:
        """Paint one GPU. `label`: or labels, longest first (the first that fits is shown);
        `link`: its node's link state and quiet, read once per block."""
        state, quiet = link or (
            self.read(gpu, roles.LINK_STATE_ROLE),
            self.read(gpu, roles.QUIET_ROLE),
        )
        facts: roles.TileData = self.read(gpu, roles.TILE_ROLE)  # one read for all it shows
        health, row = facts.health, facts.row
        stale = quiet is not None and quiet.stale
        if self.metrics.compact:
            self.compact.paint(painter, facts, tile, (stale, state), selected)
            return
        fill = STALE_FILL if stale else self.fill(health, row, state)
        painter.setPen(QPen(QColor("#ffffff"), 2) if selected else Qt.PenStyle.NoPen)
        painter.setBrush(fill)
        painter.drawRoundedRect(tile.adjusted(1, 1, -1, -1), 4, 4)
        inner = tile.adjusted(6, 3, -6, -3)
        condition = facts.condition
        tag = tile_tag(condition) if health != "lost" else None  # LOST says it all
        if tag is None:
            middle = self._control(painter, tile, inner, facts)
        else:
            assert condition is not None
            middle = self._health(painter, tile, condition, tag, facts)
        alert = facts.alert
        lost = health == "lost"
        self._alert(painter, tile, alert, beside=middle, badge=not lost)
        painter.setPen(STALE_TEXT if stale else TEXT)
        painter.setFont(self.small)
        top = Qt.AlignmentFlag.AlignTop
        room = inner.width() - _width(self.text(True, self._temp_text(row))) - 6
        if middle and alert is not None:
            room = min(room, tile.center().x() - 10 - inner.x())  # the badge moved up
        painter.drawText(inner, Qt.AlignmentFlag.AlignLeft | top, self.label_text(label, room))
        if lost:
            self._lost(painter, inner, alert)
            return
        if quiet is not None and stale:
            self._age(painter, row, inner, quiet)
            return
        self._values(painter, row, inner)

    def _lost(self, painter: QPainter, inner: QRect, alert: Severity | None) -> None:
        """LOST in the middle; with an alert, its badge beside the word, never over it."""
        painter.setFont(self.big)
        width = painter.fontMetrics().horizontalAdvance(LOST_WORD)
        size = self.badge
        badge = 0 if alert is None else size + BADGE_GAP
        x = max(inner.x(), inner.center().x() + 1 - (width + badge) // 2)
        word = QRect(x, inner.y(), width, inner.height())
        left_middle = Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter
        painter.drawText(word, left_middle, LOST_WORD)
        if alert is not None:
            at = QPoint(word.right() + 1 + BADGE_GAP, inner.center().y() + 1 - size // 2)
            self._badge(painter, QRect(at, QSize(size, size)), ALERT_COLORS[alert])

    @staticmethod
    def focus_ring(painter: QPainter, tile: QRect) -> None:
        """The keyboard's tile: a cyan ring in the gap around it, apart from selection's white."""
        painter.setPen(QPen(FOCUS_RING, 2))
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawRoundedRect(tile.adjusted(-1, -1, 1, 1), 5, 5)

    def _age(self, painter: QPainter, row: Row | None, inner: QRect, quiet: Quiet) -> None:
        """A stale tile: its last temperature, dimmed, and how old it is ("no data 7 s")."""
        temp = value(row, TEMP_GPU_C)
        painter.setFont(self.big)
        top_right = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignTop
        painter.drawText(inner, top_right, "n/a" if temp is None else f"{temp:.0f}°C")
        painter.setPen(TEXT)
        painter.setFont(self.small)
        bottom = Qt.AlignmentFlag.AlignBottom | Qt.AlignmentFlag.AlignHCenter
        painter.drawText(inner, bottom, f"no data {age_text(quiet.silent_s)}")

    def fill(self, health: str | None, row: Row | None, state: LinkState) -> QColor:
        """A tile's colour: its scale's colour at its value (by whole units, cached)."""
        if health == "lost":
            fill = LOST
        else:
            shown = value(row, coloured_by(self.color_by))
            key = (self.color_by, -1 if shown is None else round(shown))
            fill = self._fills.get(key) or self._fills.setdefault(
                key, scale_color(None if shown is None else key[1], STOPS[self.color_by])
            )
        if state is not LinkState.CONNECTED:
            fill = fill.darker(180)  # stale: the node is not streaming right now
        return fill

    def text(self, big: bool, text: str) -> QStaticText:
        """`text` laid out once in the big or small font (figures repeat from tile to tile)."""
        key = (big, text)
        found = self._texts.get(key)
        if found is None:
            found = self._texts[key] = QStaticText(text)
            found.setTextFormat(Qt.TextFormat.PlainText)
            found.prepare(font=self.big if big else self.small)
        return found

    def label_text(self, label: str | tuple[str, ...], room: int) -> str:
        """The first label that fits `room` px, else the last shortened from the middle
        (so "gpu-node-03:1" keeps its node and its index)."""
        labels = (label,) if isinstance(label, str) else label
        key = (labels, room)
        found = self._labels.get(key)
        if found is None:
            if len(self._labels) > 4096:  # labels x widths: bounded, however the fleet changes
                self._labels.clear()
            metrics = QFontMetrics(self.small)
            fits = [text for text in labels if metrics.horizontalAdvance(text) <= room]
            found = self._labels[key] = (
                fits[0]
                if fits
                else metrics.elidedText(labels[-1], Qt.TextElideMode.ElideMiddle, room)
            )
        return found

    @staticmethod
    def _temp_text(row: Row | None) -> str:
        temp = value(row, TEMP_GPU_C)
        return "n/a" if temp is None else f"{temp:.0f}°C"

    def _values(self, painter: QPainter, row: Row | None, inner: QRect) -> None:
        """Temperature top right; utilisation and memory at the bottom, memory where it fits."""
        temp = self.text(True, self._temp_text(row))
        painter.setFont(self.big)
        painter.drawStaticText(inner.right() + 1 - _width(temp), inner.y(), temp)
        painter.setFont(self.small)
        util = value(row, UTIL_GPU_PCT)
        util_text = self.text(False, "util n/a" if util is None else f"{util:.0f}%")
        y = inner.bottom() + 1 - _height(util_text)
        painter.drawStaticText(inner.x(), y, util_text)
        used, total = value(row, MEM_USED_BYTES), value(row, MEM_TOTAL_BYTES)  # GiB
        if used is not None and total:
            mem = self.text(False, f"{used:.0f}/{total:.0f}G")
            if _width(util_text) + 6 + _width(mem) <= inner.width():
                painter.drawStaticText(inner.right() + 1 - _width(mem), y, mem)

    def _control(self, painter: QPainter, tile: QRect, inner: QRect, facts: roles.TileData) -> bool:
        """The middle line: a lock, the holder and the time left; or the workload running.

        Returns whether it drew one (the alert badge then moves up, out of its way).
        """
        reservation, workload = facts.reservation, facts.workload
        if reservation is None and workload is None:
            return False
        painter.setFont(self.small)
        high = painter.fontMetrics().height()  # a wall's type is taller than 14 px
        line = QRect(inner.x(), tile.center().y() - high // 2, inner.width(), high)
        left, right = Qt.AlignmentFlag.AlignLeft, Qt.AlignmentFlag.AlignRight
        middle = Qt.AlignmentFlag.AlignVCenter
        if reservation is None:
            assert workload is not None
            painter.setPen(RUNNING_TEXT)
            text = painter.fontMetrics().elidedText(
                f"▶ {workload.name or workload.id}", Qt.TextElideMode.ElideRight, line.width()
            )
            painter.drawText(line, left | middle, text)
            return True
        self._stripe(painter, tile)
        self._lock(painter, QPoint(line.x(), line.y() + 2))
        seconds = (reservation.until_unix_ms - time.time() * 1000) / 1000
        remaining = duration_text(seconds, compact=True) + (" ▶" if workload is not None else "")
        painter.setPen(RESERVED_TEXT)
        metrics = painter.fontMetrics()
        painter.drawText(line, right | middle, remaining)
        room = line.width() - 12 - metrics.horizontalAdvance(remaining) - 4
        holder = metrics.elidedText(reservation.holder, Qt.TextElideMode.ElideRight, room)
        painter.drawText(line.adjusted(12, 0, 0, 0), left | middle, holder)
        return True

    @staticmethod
    def _stripe(painter: QPainter, tile: QRect) -> None:
        """The left edge of a reserved GPU."""
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(RESERVED)
        painter.drawRect(QRect(tile.x() + 1, tile.y() + 6, 3, tile.height() - 12))

    def _health(
        self,
        painter: QPainter,
        tile: QRect,
        condition: GpuCondition,
        tag: str,
        facts: roles.TileData,
    ) -> bool:
        """A GPU that is not healthy, or drained: a tag in the middle line, hatching if drained.

        The tag takes the middle line from a reservation's holder or a workload's name
        (the stripe of a reservation stays; the tooltip and the detail name the rest).
        Returns True: the alert badge moves up, out of its way.
        """
        if condition.drained:
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(DRAINED_HATCH)
            painter.drawRoundedRect(tile.adjusted(1, 1, -1, -1), 4, 4)
        if facts.reservation is not None:
            self._stripe(painter, tile)
        fill, border, text = HEALTH_STYLES[_style_of(condition)]
        painter.setFont(self.tag_font)
        width = self._tag_widths.get(tag)
        if width is None:  # measured once per tag, not on every paint
            width = self._tag_widths[tag] = painter.fontMetrics().horizontalAdvance(tag) + 10
        chip = QRect(tile.center().x() - width // 2, tile.center().y() - 7, width, 15)
        painter.setPen(QPen(border, 1))
        painter.setBrush(fill)
        painter.drawRoundedRect(chip, 3, 3)
        painter.setPen(text)
        painter.drawText(chip, Qt.AlignmentFlag.AlignCenter, tag)
        return True

    @staticmethod
    def _lock(painter: QPainter, at: QPoint) -> None:
        """A padlock, 9 by 11 px, its top left at `at`."""
        painter.setPen(QPen(RESERVED, 1.5))
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawArc(QRect(at.x() + 1, at.y(), 6, 7), 0, 180 * 16)
        painter.drawLine(at.x() + 1, at.y() + 3, at.x() + 1, at.y() + 5)
        painter.drawLine(at.x() + 7, at.y() + 3, at.x() + 7, at.y() + 5)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(RESERVED)
        painter.drawRect(QRect(at.x(), at.y() + 5, 9, 6))

    def _alert(
        self,
        painter: QPainter,
        tile: QRect,
        severity: Severity | None,
        beside: bool = False,
        badge: bool = True,
    ) -> None:
        """A thick coloured frame and a "!" badge: a critical GPU is impossible to miss.

        The badge sits in the middle of the tile, or at the top between the label and
        the temperature when the middle line shows a reservation or workload; `badge`
        False: the frame only (a lost tile puts the badge beside its word).
        """
        if severity is None:
            return
        color = ALERT_COLORS[severity]
        painter.setPen(QPen(color, 4 if severity is Severity.CRITICAL else 2))
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawRoundedRect(tile.adjusted(2, 2, -2, -2), 4, 4)
        if badge:
            size = self.badge
            y = tile.y() + 3 if beside else tile.center().y() - size // 2
            at = QPoint(tile.center().x() - size // 2, y)
            self._badge(painter, QRect(at, QSize(size, size)), color)

    def _badge(self, painter: QPainter, badge: QRect, color: QColor) -> None:
        """The "!" in a disc of the alert's colour."""
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(color)
        painter.drawEllipse(badge)
        painter.setPen(QColor("#ffffff"))
        painter.setFont(self.badge_font)
        painter.drawText(badge, Qt.AlignmentFlag.AlignCenter, "!")


def _width(text: QStaticText) -> int:
    return math.ceil(text.size().width())


def _height(text: QStaticText) -> int:
    return math.ceil(text.size().height())


def _mark_color(condition: GpuCondition) -> QColor:
    """A compact tile's health dot: the colour of the tag it has no room for."""
    style = _style_of(condition)
    return HEALTH_STYLES[style][0 if style == "serious" else 1]


def _style_of(condition: GpuCondition) -> str:
    if condition.state.needs_action:
        return "serious"
    return "drained" if condition.state is HealthState.HEALTHY else "watch"


def age_text(seconds: float) -> str:
    """How old a stale node's data is: "7 s", "4 min", "2 h"."""
    if seconds < 60:
        return f"{int(seconds)} s"
    return f"{int(seconds // 60)} min" if seconds < 3600 else f"{int(seconds // 3600)} h"


def _node_status(state: LinkState, quiet: Quiet | None) -> str:
    """What a node's header says after its name: "[not responding: no data 7 s]"."""
    if quiet is not None and quiet.not_responding:
        return f"not responding: no data {age_text(quiet.silent_s)}"
    return "" if state is LinkState.CONNECTED else f"  [{state.value}]"
