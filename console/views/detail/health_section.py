"""HealthSection: the GPU detail's Health part: state, reasons, Xids, signals, MIG.

Renders console.fleet.health_report's parts as rich text in one label (one
widget, re-set only when its text changes), in a scroll area that stays short
for a healthy GPU and scrolls for a sick one with many reasons.
"""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QFrame, QLabel, QScrollArea, QWidget

from console.fleet.health import HealthState
from console.fleet.health_report import Part
from console.qt.status_inks import Ink
from console.views.common import theme

MAX_HEIGHT = 170
_INDENT = "&nbsp;" * 4
# The state's word, coloured as the tile's tag is.
# (The theme's inks: readable on the detail's window in both themes.)
STATE_INKS = {
    HealthState.HEALTHY: Ink.GOOD,
    HealthState.DEGRADED: Ink.WARNING,
    HealthState.SUSPECT: Ink.WARNING,
    HealthState.NEEDS_RESET: Ink.ATTENTION,
    HealthState.NEEDS_REBOOT: Ink.ATTENTION,
    HealthState.NEEDS_INSPECTION: Ink.ATTENTION,
}


def _ink(ink: Ink) -> str:
    """The shown theme's colour for a status word (#rrggbb)."""
    return theme.current().inks()[ink]


def _line_html(line: str) -> str:
    """An indented line (an Xid's advice) reads as a note under the line above it."""
    if line.startswith("    "):
        note = html.escape(line.strip())
        return f'<span style="color:{_ink(Ink.MUTED)}">{_INDENT}{note}</span>'
    return html.escape(line)


def report_html(parts: list[Part], state: HealthState | None) -> str:
    blocks = []
    for i, part in enumerate(parts):
        lines = [_line_html(line) for line in part.lines]
        if i == 0 and state is not None and lines:
            color = _ink(STATE_INKS[state])
            lines[0] = f'<span style="color:{color}; font-weight:bold">{lines[0]}</span>'
        body = "<br>".join(lines)
        blocks.append(f"<b>{html.escape(part.heading)}</b><br>{body}")
    return "<br>".join(blocks)


class HealthSection(QScrollArea):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("healthSection")
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setMaximumHeight(MAX_HEIGHT)
        self.label = QLabel("")
        self.label.setObjectName("healthText")
        self.label.setWordWrap(True)
        self.label.setTextFormat(Qt.TextFormat.RichText)
        self.label.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.setWidget(self.label)
        # The panel's dark background shows through (dark.qss styles the panel, not us).
        self.viewport().setAutoFillBackground(False)
        self.label.setAutoFillBackground(False)
        self.parts: list[Part] = []

    def show_report(self, parts: list[Part], state: HealthState | None) -> None:
        self.parts = parts
        text = report_html(parts, state)
        if text == self.label.text():
            return
        self.label.setText(text)
        self._fit()

    def _fit(self) -> None:
        """As tall as its text at this width, wrapped lines counted (a healthy GPU's few
        lines, a sick one's up to MAX_HEIGHT, then it scrolls); the plots take the rest."""
        wanted = self.label.heightForWidth(max(1, self.viewport().width()))
        height = min(MAX_HEIGHT, max(wanted, self.label.fontMetrics().lineSpacing()) + 4)
        if height != self.minimumHeight():
            self.setMinimumHeight(height)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit()  # narrower: more lines wrap

    def plain_text(self) -> str:
        """What the section says, line by line (for tests and copying)."""
        return "\n".join(line for p in self.parts for line in (p.heading, *p.lines))
