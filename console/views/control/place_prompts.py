"""PlacePrompts: a drop made from the keyboard — assign a workload, reserve GPUs, release.

A drop joins two things: what is dragged (a queued workload, a person) and the
tile it lands on. From a menu one of them is known, so a ChoiceDialog asks for
the other. Every choice is judged by the grid's own TileDropRules with the MIME
data the drag would carry, and the chosen pair goes to ControlPrompts exactly
as the drop's signal would: the same verdicts, the same words, the same request.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence

from PySide6.QtCore import QMimeData, Signal
from PySide6.QtWidgets import QMessageBox, QWidget

from console.fleet.control import ReservationRow, WorkloadRow
from console.fleet.model import FleetModel
from console.fleet.placement import Place, clock_text, gpus_text
from console.fleet.updates import LinkState
from console.qt.drop_rules import TileDrop, TileDropRules
from console.qt.mime import holder_mime, workload_mime
from console.views.common.choice_dialog import ChoiceDialog
from console.views.common.prompt_host import PromptHost
from console.views.control.control_prompts import ControlPrompts
from gpufleet.states import WorkloadState


class PlacePrompts(PromptHost):
    message = Signal(str)  # for the status bar: why nothing was asked or sent

    def __init__(
        self,
        fleet: FleetModel,
        rules: TileDropRules,
        prompts: ControlPrompts,
        window: QWidget,
        selection: Callable[[], Collection[Place]] = frozenset,
        people: Callable[[], Sequence[str]] = tuple,
    ) -> None:
        """`selection`: the grid's selected tiles (a drop on one of them takes them all)."""
        super().__init__(window)
        self.setObjectName("placePrompts")
        self._fleet, self._rules, self._prompts, self._window = fleet, rules, prompts, window
        self._selection, self._people = selection, people

    # -- from a tile: what goes there ------------------------------------------

    def assign_here(self, target: str, gpu: int) -> None:
        """A tile's "Assign a queued workload here…": choose among its node's queue."""
        queued = [w for w in self._fleet.control.workloads(target)
                  if w.state is WorkloadState.QUEUED]  # fmt: skip
        if not queued:
            self.message.emit(f"Nothing to assign: no workload is queued on {self._name(target)}")
            return
        choices = [(f"{w.label} of {w.owner or 'nobody'} ({w.gpu_count} GPU)", w) for w in queued]
        self._choose(
            f"Assign to GPU {gpu} of {self._name(target)}",
            choices,
            lambda w: self._judge(workload_mime(w), (target, gpu)),  # type: ignore[arg-type]
            "assign",
        )

    def reserve_here(self, target: str, gpu: int) -> None:
        """A tile's "Reserve for…": choose a user or team (or type one)."""
        self._choose(
            f"Reserve GPU {gpu} of {self._name(target)} for",
            [(name, name) for name in self._people()],
            lambda holder: self._judge(holder_mime(str(holder)), (target, gpu)),
            "reserve",
            free_text=True,
        )

    # -- from a row: where it goes ---------------------------------------------

    def assign_workload(self, workload: WorkloadRow) -> None:
        """A workload row's "Assign to GPU…": choose one of its node's GPUs."""
        self._choose(
            f"Assign {workload.label} to",
            self._gpus([workload.target]),
            lambda place: self._judge(workload_mime(workload), place),  # type: ignore[arg-type]
            "assign",
        )

    def reserve_for(self, holder: str) -> None:
        """A person's "Reserve GPU…": choose a GPU (one in the selection takes them all)."""
        selection = sorted(self._selection())
        self._choose(
            f"Reserve for {holder}",
            self._gpus([n.target for n in self._fleet]),
            lambda place: self._judge(holder_mime(holder), place),  # type: ignore[arg-type]
            "reserve",
            current=selection[0] if selection else None,
        )

    def release_for(self, holder: str) -> None:
        """A person's "Release their reservations…": after a question naming each one."""
        held = [r for r in self._fleet.control.reservations() if r.holder == holder]
        if not held:
            self.message.emit(f"Nothing to release: {holder} holds no reservation")
            return
        now = int(time.time() * 1000)
        listed = "\n".join(self._reservation_text(r, now) for r in held)
        box = QMessageBox(
            QMessageBox.Icon.Question, "Release reservations",
            f"Release {len(held)} reservation{'s' * (len(held) > 1)} of {holder}?\n{listed}",
            QMessageBox.StandardButton.Ok | QMessageBox.StandardButton.Cancel, self._window,
        )  # fmt: skip
        box.setObjectName("releaseReservationsBox")
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)  # Enter keeps them

        def release() -> None:
            for reservation in held:
                self._prompts.release(reservation)

        self._open(box, release)

    # -- helpers ---------------------------------------------------------------

    def _choose(
        self,
        title: str,
        choices: Sequence[tuple[str, object]],
        judge: Callable[[object], TileDrop],
        verb: str,
        current: object | None = None,
        free_text: bool = False,
    ) -> None:
        dialog = ChoiceDialog(
            title,
            choices,
            lambda value: judge(value).verdict,
            verb,
            current,
            free_text,
            self._window,
        )

        def go() -> None:
            chosen = dialog.chosen()
            if chosen is not None:
                self._send(judge(chosen), verb)  # judged again: the fleet moved meanwhile

        self._open(dialog, go)

    def _send(self, drop: TileDrop, verb: str) -> None:
        if not drop.verdict.ok:
            self.message.emit(f"Cannot {verb}: {drop.verdict.reason}")
        elif drop.workload is not None:
            self._prompts.assign(drop.workload, drop.verdict)
        elif drop.holder is not None:
            self._prompts.ask_reserve(drop.holder, drop.verdict)

    def _judge(self, data: QMimeData, place: Place) -> TileDrop:
        return self._rules.judge(data, *place, self._selection())

    def _gpus(self, targets: Sequence[str]) -> list[tuple[str, object]]:
        """Every GPU of these nodes that are connected, as "node-a · GPU 2"."""
        found: list[tuple[str, object]] = []
        for target in targets:
            node = self._fleet.node(target)
            if node.state is LinkState.CONNECTED:
                found += [(f"{node.name} · GPU {g}", (target, g)) for g in range(node.gpu_count)]
        return found

    def _reservation_text(self, r: ReservationRow, now: int) -> str:
        until = clock_text(r.until_unix_ms, now)
        why = f" ({r.reason})" if r.reason else ""
        return f"• {gpus_text(r.gpu_indices)} of {self._name(r.target)} until {until}{why}"

    def _name(self, target: str) -> str:
        return self._fleet.name_of(target)
