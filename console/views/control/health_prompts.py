"""HealthPrompts: between a tile's health menu and the node: ask why, then send.

"Drain from placement…" asks for a reason, "Mark repaired (clear health)…"
asks what was done; "Return to placement" goes at once. Dialogs open with
`open()`, never `exec()` (no nested event loop while the network answers);
`dialog` is the one open now (tests fill and accept it). The node decides and
its refusal, in its own words, reaches the message line as any command's does.
"""

from __future__ import annotations

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
        if self._refused(target, role_needed("DrainGpu"), "drain"):
            return
        dialog = HealthDialog(
            "Drain GPU from placement",
            f"{self._where(target, gpu)} takes no new work until it is returned to placement. "
            "What runs there now keeps running.",
            "Reason", "why, e.g. fan noise, waiting for a reset window", "Drain", self._window,
        )  # fmt: skip
        self._open(dialog, lambda: self._actions.drain(target, gpu, dialog.text))

    def undrain(self, target: str, gpu: int) -> None:
        if not self._refused(target, role_needed("DrainGpu"), "return to placement"):
            self._actions.undrain(target, gpu)

    def ask_clear(self, target: str, gpu: int) -> None:
        if self._refused(target, role_needed("ClearGpuHealth"), "clear health"):
            return
        dialog = HealthDialog(
            "Mark GPU repaired",
            f"Clear the health reasons of {self._where(target, gpu)}: the node judges it afresh "
            "from its next readings. Say what was done; it goes to the audit log.",
            "What was done", "e.g. GPU reset, reseated riser, replaced under RMA 1234",
            "Mark repaired", self._window,
        )  # fmt: skip
        self._open(dialog, lambda: self._actions.clear(target, gpu, dialog.text))

    def _refused(self, target: str, needed: Role, what: str) -> bool:
        refusal = self._fleet.role_refusal(target, needed)
        if refusal is not None:
            self.message.emit(f"Cannot {what}: {refusal}")
        return refusal is not None

    def _where(self, target: str, gpu: int) -> str:
        return f"GPU {gpu} of {self._fleet.name_of(target)}"
