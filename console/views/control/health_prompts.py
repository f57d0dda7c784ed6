"""HealthPrompts: between a tile's health menu and the node: ask why, then send.

"Drain from placement…" asks for a reason, "Mark repaired (clear health)…"
asks what was done; "Return to placement" goes at once. Dialogs open with
`open()`, never `exec()` (no nested event loop while the network answers);
`dialog` is the one open now (tests fill and accept it). The node decides and
its refusal, in its own words, reaches the message line as any command's does.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QWidget

from console.connections.health_actions import HealthActions
from console.fleet.model import FleetModel
from console.views.common.prompt_host import PromptHost
from console.views.control.health_dialog import HealthDialog
from gpufleet.policy import Role, role_needed


class HealthPrompts(PromptHost):
    message = Signal(str)  # for the status bar: why something was not even asked

    def __init__(self, fleet: FleetModel, actions: HealthActions, window: QWidget) -> None:
        super().__init__(window)
        self.setObjectName("healthPrompts")
        self._fleet, self._actions, self._window = fleet, actions, window

    def ask_drain(self, target: str, gpu: int) -> None:
        self._ask(target, gpu, "DrainGpu", "drain", self._actions.drain, (
            "Drain GPU from placement",
            "{where} takes no new work until it is returned to placement. "
            "What runs there now keeps running.",
            "Reason", "why, e.g. fan noise, waiting for a reset window", "Drain",
        ))  # fmt: skip

    def undrain(self, target: str, gpu: int) -> None:
        if not self._refused(target, role_needed("DrainGpu"), "return to placement"):
            self._actions.undrain(target, gpu)

    def ask_clear(self, target: str, gpu: int) -> None:
        self._ask(target, gpu, "ClearGpuHealth", "clear health", self._actions.clear, (
            "Mark GPU repaired",
            "Clear the health reasons of {where}: the node judges it afresh from its next "
            "readings. Say what was done; it goes to the audit log.",
            "What was done", "e.g. GPU reset, reseated riser, replaced under RMA 1234",
            "Mark repaired",
        ))  # fmt: skip

    def _ask(
        self,
        target: str,
        gpu: int,
        method: str,
        what: str,
        send: Callable[[str, int, str], None],
        words: tuple[str, str, str, str, str],
    ) -> None:
        """Unless our role may not call `method` (then say why), ask in a HealthDialog of
        `words` (title, what it does with {where}, label, placeholder, button) and `send`
        the target, the GPU and the text written."""
        if self._refused(target, role_needed(method), what):
            return
        title, text, label, placeholder, button = words
        where = self._where(target, gpu)
        dialog = HealthDialog(
            title, text.format(where=where), label, placeholder, button, self._window
        )
        self._open(dialog, lambda: send(target, gpu, dialog.text))

    def _refused(self, target: str, needed: Role, what: str) -> bool:
        refusal = self._fleet.role_refusal(target, needed)
        if refusal is not None:
            self.message.emit(f"Cannot {what}: {refusal}")
        return refusal is not None

    def _where(self, target: str, gpu: int) -> str:
        return f"GPU {gpu} of {self._fleet.name_of(target)}"
