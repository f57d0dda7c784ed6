"""WindowFrame: what a wing's part may ask of the window that holds it.

A part (console/views/*/part.py) builds its wing's models, panels and prompts and
wires them to the frame pump, to the grid's extension points and to this frame:
the message line, the bottom tabs, opening a GPU and the roles watcher. The
window composes the parts; no part reaches into another's widgets but through
what that part exposes.
"""

from __future__ import annotations

from typing import Protocol

from PySide6.QtWidgets import QTabWidget, QWidget

from console.qt.access_watcher import AccessWatcher
from console.session import ConsoleSession


class WindowFrame(Protocol):
    session: ConsoleSession
    access: AccessWatcher  # roles: offer only what WhoAmI says we may do
    tabs: QTabWidget  # the bottom dock's tabs

    def show_message(self, text: str) -> None:
        """The one place where messages for the user appear (nodes by name)."""

    def open_gpu(self, target: str, gpu: int) -> None:
        """Select the GPU's tile, scroll to it and bring the window up."""

    def show_tab(self, tab: QWidget) -> None:
        """Bring one of the bottom tabs forward."""

    def window(self) -> QWidget:
        """The window itself: the parent of the parts' dialogs and toasts."""
