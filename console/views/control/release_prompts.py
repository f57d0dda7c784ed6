"""ReleasePrompts: release a reservation (or some of its GPUs) after a confirmation, and
Undo for a few seconds after the daemon confirmed it.

The Reservations panel and a tile's menu both ask here, so a release is always
the same question naming the node, the GPUs and the holder, and one release
frees exactly the GPUs named (a tile frees only itself). Undo re-reserves those
GPUs for the same holder, reason and end (console.fleet.reservations.UndoWindow).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QMessageBox, QWidget

from console.connections.control_actions import ControlActions
from console.fleet.control import ReservationRow
from console.fleet.model import FleetModel
from console.fleet.reservations import UNDO_S, Release, UndoWindow, release_of
from console.fleet.updates import CommandResult
from console.qt.named_timer import named_timer
from console.views.common.prompt_host import PromptHost


class ReleasePrompts(PromptHost):
    message = Signal(str)  # for the status bar
    undoChanged = Signal(object)  # the Release Undo would restore now, or None

    def __init__(self, fleet: FleetModel, actions: ControlActions, window: QWidget) -> None:
        super().__init__(window)
        self.setObjectName("releasePrompts")
        self._fleet, self._actions, self._window = fleet, actions, window
        self.undo = UndoWindow()
        # Sent, waiting for the daemon's word: only a confirmed release may be undone.
        self._sent: dict[tuple[str, str], Release] = {}
        self._undo_timer = named_timer(
            self, "gpufleet-undo-release-timer", self._on_undo_timer_timeout, single_shot=True
        )

    def ask_release(self, reservation: ReservationRow, gpus: Sequence[int] = ()) -> None:
        """Ask before freeing `gpus` of the reservation (all of them when empty)."""
        try:
            release = release_of(reservation, self._fleet.name_of(reservation.target), gpus)
        except ValueError as error:
            self.message.emit(f"Cannot release: {error}")
            return
        box = QMessageBox(
            QMessageBox.Icon.Question, "Release reservation",
            release.question(int(time.time() * 1000)),
            QMessageBox.StandardButton.Ok | QMessageBox.StandardButton.Cancel, self._window,
        )  # fmt: skip
        box.setObjectName("releaseReservationBox")
        box.button(QMessageBox.StandardButton.Ok).setText("Release")
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)  # Enter keeps it
        self._open(box, lambda: self._send(release))

    def ask_release_gpu(self, reservation: ReservationRow, gpu: int) -> None:
        """A tile's "Release…": only that GPU, whatever else the reservation holds."""
        self.ask_release(reservation, (gpu,))

    def undo_release(self) -> None:
        """Reserve the last released GPUs again, while the window is open."""
        restore = self.undo.take()
        self._undo_timer.stop()
        self.undoChanged.emit(None)
        if restore is None:
            self.message.emit("Nothing to undo: no release in the last few seconds")
            return
        self._actions.reserve(
            restore.target, restore.gpus, restore.holder, restore.until_unix_ms, restore.reason
        )

    def on_command_finished(self, result: CommandResult) -> None:
        payload = result.payload
        if result.ok and isinstance(payload, ReservationRow) and payload.uid in self._sent:
            release = self._sent.pop(payload.uid)
            self.undo.opened(release)
            self._undo_timer.start(int(UNDO_S * 1000))
            self.undoChanged.emit(release)
            self.message.emit(f"Released {release.what}. Undo: Ctrl+Z within {UNDO_S:.0f} s")
        elif not result.ok and result.what.startswith("release"):
            # A refused release frees nothing: there is nothing to undo.
            for uid in [uid for uid in self._sent if uid[0] == result.target]:
                del self._sent[uid]

    def _send(self, release: Release) -> None:
        self._sent[release.reservation.uid] = release
        self._actions.release(release.reservation, release.request_gpus)

    def _on_undo_timer_timeout(self) -> None:
        self.undo.close()
        self.undoChanged.emit(None)
