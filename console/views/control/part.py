"""ControlPart: placing, reserving, releasing, submitting, cancelling, killing, draining.

Drops and menus ask the prompts, which confirm where needed and send through the
session's actions; answers come back as CommandResults on the frame pump. The
keyboard's drops (a menu entry on a tile or a row) ask PlacePrompts for the other
half. The workload, people and reservation panels are this wing's tabs.
"""

from __future__ import annotations

from PySide6.QtCore import QObject
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QWidget

from console.qt.people_model import PeopleListModel
from console.qt.reservation_model import ReservationTableModel
from console.qt.workload_model import WorkloadTableModel
from console.views.common.frame import WindowFrame
from console.views.control.control_prompts import ControlPrompts
from console.views.control.health_prompts import HealthPrompts
from console.views.control.people_panel import PeoplePanel
from console.views.control.place_prompts import PlacePrompts
from console.views.control.release_prompts import ReleasePrompts
from console.views.control.reservations_panel import ReservationsPanel
from console.views.control.workload_panel import WorkloadPanel
from console.views.detail.part import DetailPart
from console.views.grid.part import GridPart


class ControlPart(QObject):
    def __init__(self, frame: WindowFrame, grid: GridPart, detail: DetailPart) -> None:
        super().__init__()
        window, session = frame.window(), frame.session
        self._frame, fleet = frame, session.fleet
        self.workload_model = WorkloadTableModel(fleet)
        self.workload_panel = WorkloadPanel(self.workload_model)
        self.people_model = PeopleListModel(fleet, session.people)
        self.people_panel = PeoplePanel(self.people_model)
        self.reservation_model = ReservationTableModel(fleet, parent=window)
        self.reservations_panel = ReservationsPanel(self.reservation_model)
        self.prompts = ControlPrompts(fleet, session.control, window, lambda: session.people)
        self.health_prompts = HealthPrompts(fleet, session.health, window)
        self.release_prompts = ReleasePrompts(fleet, session.control, window)
        # Ctrl+Z: undo the last release for a few seconds after it (ReleasePrompts).
        self.undo_release = QAction("Undo release", window, shortcut=QKeySequence("Ctrl+Z"))
        window.addAction(self.undo_release)
        self.place_prompts = PlacePrompts(
            fleet, grid.drop_rules, self.prompts, window,
            lambda: grid.grid.selection, self.people_names,
        )  # fmt: skip
        self._wire_models()
        self._wire_grid(grid)
        self._wire_panels(detail)

    def tabs(self) -> list[tuple[QWidget, str]]:
        return [(self.people_panel, "People"), (self.reservations_panel, "Reservations")]

    def people_names(self) -> list[str]:
        model = self.people_model
        return [model.person(row).name for row in range(model.rowCount())]

    def _wire_models(self) -> None:
        pump, frame = self._frame.session.pump, self._frame
        pump.fleetChanged.connect(self.workload_model.on_fleet_changed)
        pump.fleetChanged.connect(self.people_model.on_fleet_changed)
        pump.fleetChanged.connect(self.reservation_model.on_fleet_changed)
        pump.commandFinished.connect(self.prompts.on_command_finished)
        pump.commandFinished.connect(self.release_prompts.on_command_finished)
        for panel in (self.workload_panel, self.reservations_panel):
            frame.access.operatorRefusalChanged.connect(panel.set_action_refusal)
        for prompts in (self.prompts, self.release_prompts, self.health_prompts,
                        self.place_prompts):  # fmt: skip
            prompts.message.connect(frame.show_message)

    def _wire_grid(self, grid: GridPart) -> None:
        tiles = grid.grid
        tiles.workloadDropped.connect(self.prompts.assign)
        tiles.holderDropped.connect(self.prompts.ask_reserve)
        # Releases ask first, name what is freed, free only what is named, and can be undone.
        tiles.releaseRequested.connect(self.release_prompts.ask_release_gpu)
        tiles.cancelRequested.connect(self.prompts.ask_cancel)
        # Health: drain or return a GPU, mark it repaired (HealthPrompts asks why first).
        tiles.drainRequested.connect(self._on_drain_requested)
        tiles.clearHealthRequested.connect(self.health_prompts.ask_clear)
        # The keyboard's drops: a menu entry asks PlacePrompts for the other half.
        tiles.offers_placement = True
        tiles.assignHereRequested.connect(self.place_prompts.assign_here)
        tiles.reserveHereRequested.connect(self.place_prompts.reserve_here)

    def _wire_panels(self, detail: DetailPart) -> None:
        self.reservations_panel.releaseRequested.connect(self.release_prompts.ask_release)
        self.reservations_panel.undoRequested.connect(self.release_prompts.undo_release)
        self.undo_release.triggered.connect(self.release_prompts.undo_release)
        self.release_prompts.undoChanged.connect(self.reservations_panel.show_undo)
        detail.detail.killRequested.connect(self.prompts.ask_kill)
        self.workload_panel.submitRequested.connect(self.prompts.ask_submit)
        self.workload_panel.cancelRequested.connect(self.prompts.ask_cancel)
        self.workload_panel.outputRequested.connect(self.prompts.show_output)
        self.workload_panel.assignRequested.connect(self.place_prompts.assign_workload)
        self.people_panel.reserveRequested.connect(self.place_prompts.reserve_for)
        self.people_panel.releaseRequested.connect(self.place_prompts.release_for)

    def _on_drain_requested(self, target: str, gpu: int, drain: bool) -> None:
        if drain:
            self.health_prompts.ask_drain(target, gpu)
        else:
            self.health_prompts.undrain(target, gpu)
