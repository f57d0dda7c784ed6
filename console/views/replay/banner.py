"""ReplayBanner: the line over the grid that says the console shows the past.

"Replay: 2026-12-07 03:12:00 — Esc or L returns to live", then what Play is doing (its
speed, or why it paused), which nodes have not answered for that moment yet, or could
not (and why), and what a node said is missing.
"""

from __future__ import annotations

from PySide6.QtWidgets import QLabel

from console.fleet.model import FleetModel
from console.fleet.timeline import moment_text

RETURN_HINT = "Esc or L returns to live"


def banner_text(fleet: FleetModel, note: str = "") -> str:
    moment = fleet.moment
    if moment is None:
        return ""
    parts = [f"Replay: {moment_text(moment.wanted_ms)} — {RETURN_HINT}"]
    if note:
        parts.append(note)
    nodes = fleet.nodes()
    shown = [n for n in nodes if n.moment is not None and n.moment.answered
             and n.moment.at_ms == moment.wanted_ms]  # fmt: skip
    if len(shown) < len(nodes):
        parts.append(f"{len(shown)} of {len(nodes)} nodes at this moment")
    for node in nodes:
        if node.moment is not None and node.moment.note:
            parts.append(f"{node.name}: {node.moment.note}")
    return " · ".join(parts)


class ReplayBanner(QLabel):
    def __init__(self, fleet: FleetModel) -> None:
        super().__init__()
        self.setObjectName("replayBanner")
        self.setWordWrap(True)
        self._fleet = fleet
        self._note = ""
        self.setVisible(False)

    def set_note(self, note: str) -> None:
        """What Play says: its speed, or why it paused ("" none)."""
        self._note = note
        self.refresh()

    def refresh(self, *_args: object) -> None:
        text = banner_text(self._fleet, self._note)
        if text != self.text():
            self.setText(text)
        self.setVisible(bool(text))
