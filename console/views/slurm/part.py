"""The console's Slurm parts, built and wired together where a profile has slurm_url.

The Slurm queue beside the gpufleet queue in the Workloads tab, its drops on the
grid's tiles (steer), the tiles' Drain/Resume in Slurm, the drain zone (a node
dragged onto it) and the processes' "Cancel Slurm job N". MainWindow builds this
part (each wing has one) when its session has a Slurm link.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt
from PySide6.QtWidgets import QSplitter, QWidget

from console.connections.slurm_actions import SlurmActions
from console.connections.slurm_link import SlurmLink
from console.fleet.model import FleetModel
from console.qt.drop_rules import TileDropRules
from console.qt.frame_pump import FramePump
from console.qt.slurm_drop import SlurmDropRules
from console.qt.slurm_watch import SlurmWatch
from console.views.detail.gpu_detail import GpuDetailPanel
from console.views.grid.fleet_grid import FleetGrid
from console.views.slurm.slurm_jobs_panel import SlurmJobsPanel
from console.views.slurm.slurm_prompts import SlurmPrompts


class SlurmPart(QObject):
    def __init__(self, fleet: FleetModel, pump: FramePump, slurm: tuple[SlurmLink, SlurmActions],
                 drop_rules: TileDropRules, grid: FleetGrid, detail: GpuDetailPanel,
                 parent: QWidget) -> None:  # fmt: skip
        super().__init__(parent)
        link, actions = slurm
        self.watch = SlurmWatch(link, self)
        rules = SlurmDropRules(fleet, self.watch)
        self.panel = SlurmJobsPanel(self.watch, rules.judge_drain)
        self.prompts = SlurmPrompts(fleet, self.watch, actions, parent)
        drop_rules.slurm = rules
        self.panel.drain_zone.drainRequested.connect(self.prompts.ask_drain)
        # Answers through the frame pump; an action's answer reads Slurm again at once.
        pump.queryFinished.connect(self.watch.on_query_finished)
        pump.commandFinished.connect(self.watch.on_command_finished)
        grid.slurmJobDropped.connect(self.prompts.steer)
        grid.slurmHolderDropped.connect(self.prompts.ask_reserve)
        self.panel.releaseRequested.connect(self.prompts.ask_release)
        grid.menu_extras.append(self.prompts.tile_entries)
        detail.process_menu_extras.append(self.prompts.process_entries)
        self.watch.read_now()

    def workloads_tab(self, gpufleet_queue: QWidget) -> QWidget:
        """The gpufleet queue over Slurm's."""
        split = QSplitter(Qt.Orientation.Vertical)
        split.setObjectName("workloadsSplitter")
        split.addWidget(gpufleet_queue)
        split.addWidget(self.panel)
        return split

    def stop(self) -> None:
        self.watch.stop()
