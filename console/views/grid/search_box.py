"""SearchBox: find a GPU, node, user, Slurm job, container or UUID (Ctrl+F), and select it.

Typing selects the first match; Enter goes to the next (and round again); Esc
goes back to the grid, on the match. The label beside the box says which match
is shown and why it matched, or that nothing matches. The matching is
console.fleet.search's; this widget only asks and shows.
"""

from __future__ import annotations

import time

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QHBoxLayout, QLabel, QLineEdit, QWidget

from console.fleet.model import FleetModel
from console.fleet.search import Match, find

PLACEHOLDER = "Find GPU, node, user, job, container, UUID (Ctrl+F)"


class SearchLine(QLineEdit):
    """The box itself: Esc leaves it (a signal), where a QLineEdit would ignore it."""

    escaped = Signal()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() == Qt.Key.Key_Escape:
            self.escaped.emit()
            return
        super().keyPressEvent(event)


class SearchBox(QWidget):
    found = Signal(str, int)  # target, GPU: select it
    left = Signal()  # Esc: back to the grid

    def __init__(self, fleet: FleetModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("searchBox")
        self._fleet = fleet
        self._matches: list[Match] = []
        self._at = -1
        self.line = SearchLine(placeholderText=PLACEHOLDER)
        self.line.setObjectName("searchLine")
        self.line.setClearButtonEnabled(True)
        self.line.setMinimumWidth(self.line.fontMetrics().horizontalAdvance(PLACEHOLDER) + 40)
        self.result = QLabel()
        self.result.setObjectName("searchResult")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(4, 0, 4, 0)
        layout.addWidget(self.line)
        layout.addWidget(self.result)
        self.line.textEdited.connect(self._on_line_text_edited)
        self.line.returnPressed.connect(self._on_line_return_pressed)
        self.line.escaped.connect(self.left)

    @property
    def matches(self) -> list[Match]:
        return list(self._matches)

    @property
    def current(self) -> Match | None:
        return self._matches[self._at] if 0 <= self._at < len(self._matches) else None

    def focus(self) -> None:
        """Ctrl+F: into the box, its text selected (typing replaces it)."""
        self.line.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.line.selectAll()

    def _on_line_text_edited(self, text: str) -> None:
        self._search(text)
        self._go(0)

    def _on_line_return_pressed(self) -> None:
        """The next match: searched again, as the fleet may have changed since."""
        was = self.current
        self._search(self.line.text())
        here = self._matches.index(was) if was in self._matches else -1
        self._go(here + 1 if self._matches else 0)

    def _search(self, text: str) -> None:
        self._matches = find(self._fleet, text, int(time.time() * 1000))
        self._at = -1

    def _go(self, at: int) -> None:
        text = self.line.text().strip()
        if not text:
            self._show("", False)
            return
        if not self._matches:
            self._show(f"nothing matches “{text}”", True)
            return
        self._at = at % len(self._matches)
        match = self._matches[self._at]
        self._show(f"{self._at + 1} of {len(self._matches)}: {match.why}", False)
        gpu = match.gpu if match.gpu is not None else 0
        if self._fleet.node(match.target).gpu_count > gpu:
            self.found.emit(match.target, gpu)

    def _show(self, text: str, missing: bool) -> None:
        self.result.setText(text)
        self.line.setProperty("noMatch", missing)  # the themes colour a search that failed
        self.line.style().unpolish(self.line)
        self.line.style().polish(self.line)
