"""PlacePrompts: a drop made from the keyboard — assign a workload, reserve GPUs, release.

A drop joins two things: what is dragged (a queued workload, a person) and the
tile it lands on. From a menu one of them is known, so a ChoiceDialog asks for
the other. Every choice is judged by the grid's own TileDropRules with the MIME
data the drag would carry, and the chosen pair goes to ControlPrompts exactly
as the drop's signal would: the same verdicts, the same words, the same request.

As a drag may drop a queued workload on any node's GPU, so the choosers offer
every node: a workload's GPUs are its own node's first (an assign), then those
of each other connected node we may submit on (a move there, as the drop's);
a tile's queued workloads are its node's first, then the rest of the fleet's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from typing import cast

from PySide6.QtCore import QMimeData, Signal
from PySide6.QtWidgets import QMessageBox, QWidget

from console.fleet.control import ReservationRow, WorkloadRow
from console.fleet.fleet_queue import qualified_id
from console.fleet.model import FleetModel
from console.fleet.place_words import place_label, place_matches
from console.fleet.placement import Place, clock_text, gpus_text
from console.fleet.updates import LinkState
from console.qt.drop_rules import TileDrop, TileDropRules
from console.qt.mime import holder_mime, workload_mime
from console.views.common.choice_dialog import ChoiceDialog, Find
from console.views.common.prompt_host import PromptHost
from console.views.control.control_prompts import ControlPrompts
from gpufleet.policy import role_needed
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
        """A tile's "Assign a queued workload here…": its node's queue first, then the
        fleet's (one of another node moves here)."""
        queued = [w for w in self._fleet.control.workloads() if w.state is WorkloadState.QUEUED]
        if not queued:
            self.message.emit("Nothing to assign: no workload is queued in the fleet")
            return
        queued.sort(key=lambda w: w.target != target)  # its node's first
        choices = [(self._workload_text(w, target), w) for w in queued]
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
        """A workload row's "Assign to GPU…": its node's GPUs, then those of every other
        connected node we may submit on (chosen, it moves there)."""
        submit = role_needed("SubmitWorkload")
        others = [n.target for n in self._fleet if n.target != workload.target
                  and self._fleet.role_refusal(n.target, submit) is None]  # fmt: skip
        self._choose(
            f"Assign or move {workload.label} to",
            self._gpus([workload.target, *others]),
            lambda place: self._judge(workload_mime(workload), place),  # type: ignore[arg-type]
            "assign",
            find=self._finds_place,
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
            find=self._finds_place,
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
        find: Find | None = None,
    ) -> None:
        dialog = ChoiceDialog(
            title,
            choices,
            lambda value: judge(value).verdict,
            verb,
            current,
            free_text,
            self._window,
            find,
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
                found += [(place_label(node.name, g), (target, g)) for g in range(node.gpu_count)]
        return found

    def _finds_place(self, typed: str, place: object) -> bool:
        """ "node-02 3", "gpu-node-02:3", "gpu-node-02 GPU 3": GPU 3 of gpu-node-02."""
        target, gpu = cast(Place, place)
        return place_matches(typed, self._name(target), gpu)

    def _workload_text(self, w: WorkloadRow, here: str) -> str:
        """ "w-3 (train) of alice (1 GPU)"; one of another node named with it, as it moves."""
        named = w.label if w.target == here else qualified_id(self._name(w.target), w.label)
        return f"{named} of {w.owner or 'nobody'} ({w.gpu_count} GPU)"

    def _reservation_text(self, r: ReservationRow, now: int) -> str:
        until = clock_text(r.until_unix_ms, now)
        why = f" ({r.reason})" if r.reason else ""
        return f"• {gpus_text(r.gpu_indices)} of {self._name(r.target)} until {until}{why}"

    def _name(self, target: str) -> str:
        return self._fleet.name_of(target)
