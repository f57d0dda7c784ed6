"""OpeningMoment: a console opened at a shared moment (`gpufleet console --at --gpu`).

Once every node has said how many GPUs it has (or after WAIT_MS, for a fleet with a
node that does not answer), the replay shows the moment and the detail the GPU; a
`--gpu` that fits no GPU, or several, is said in the status bar. `settled` is true
once the moment's answers are in, so that `--screenshot` shows the moment, not the
console on its way there.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject

from console.fleet.moment_link import Place, find_place
from console.qt.named_timer import named_timer

if TYPE_CHECKING:
    from console.main_window import MainWindow

WAIT_MS = 15_000
log = logging.getLogger(__name__)


class OpeningMoment(QObject):
    def __init__(self, window: MainWindow, at_ms: int | None, gpu: str | None) -> None:
        super().__init__(window)
        self.setObjectName("gpufleet-opening-moment")
        self._window, self._at_ms, self._gpu = window, at_ms, gpu
        self.opened = False
        self._pump = window.session.pump
        self._pump.fleetChanged.connect(self._on_pump_fleet_changed)
        self._late = named_timer(self, "gpufleet-opening-late", self._open, single_shot=True)
        self._late.start(WAIT_MS)

    @property
    def settled(self) -> bool:
        """Opened, and every node's answer for the moment is in (or it said why not)."""
        if not self.opened:
            return False
        moment = self._window.session.fleet.moment
        if self._at_ms is None:
            return True
        return moment is not None and moment.settled

    def _on_pump_fleet_changed(self, _changes: object) -> None:
        fleet = self._window.session.fleet
        if all(node.gpu_count > 0 for node in fleet):
            self._open()

    def _open(self) -> None:
        if self.opened:
            return
        self.opened = True
        self._late.stop()
        self._pump.fleetChanged.disconnect(self._on_pump_fleet_changed)
        window = self._window
        if self._at_ms is not None:
            window.replay.show_at(self._at_ms)
        if self._gpu is not None:
            fleet = window.session.fleet
            places = [Place(n.target, n.name, gpu) for n in fleet for gpu in range(n.gpu_count)]
            try:
                place = find_place(self._gpu, places)
            except ValueError as exc:
                log.warning("%s", exc)  # a --screenshot run's only witness
                window.show_message(str(exc))
                return
            window.open_gpu(place.target, place.gpu)
