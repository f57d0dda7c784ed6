"""DetailPart: the selected GPU's detail (facts, readings, health, plots, processes).

It scrolls as a whole on a short screen (stacked, it wanted 875 px, more than a
1366x768 window has), follows the grid's selection, takes the plots' older ranges
from the daemons' history or Prometheus off the GUI thread, and yields the frame
to the grid after each refresh. While the console shows a past moment (incident
replay) the plots hold the range around it, the moment marked: moved at most every
FOLLOW_MS while the cursor runs (Play moves it every frame, and a plot redrawn over a
moved range costs a frame's budget), to the last moment wanted.
"""

from __future__ import annotations

import time

from PySide6.QtCore import QObject

from console.qt.named_timer import named_timer
from console.views.common.frame import WindowFrame
from console.views.common.scroll_area import vertical_scroll
from console.views.detail.gpu_detail import GpuDetailPanel
from console.views.grid.part import GridPart
from console.views.plots.plot_history import PlotHistory

FOLLOW_MS = 500


class DetailPart(QObject):
    def __init__(self, frame: WindowFrame, grid: GridPart) -> None:
        super().__init__()
        session = self._session = frame.session
        self.detail = GpuDetailPanel(session.fleet)
        prometheus = session.history.prometheus is not None
        self.plot_history = PlotHistory(session.fleet, session.history, prometheus, parent=self)
        self.detail.plots.use_history(self.plot_history)
        self.detail_scroll = vertical_scroll("detailScroll", self.detail)
        pump = session.pump
        pump.fleetChanged.connect(self.detail.on_fleet_changed)
        # The plots' refresh takes its frame; the grid's changed blocks wait for the next.
        self.detail.refreshed.connect(grid.grid.yield_frame)
        pump.queryFinished.connect(self.plot_history.on_query_finished)
        frame.access.changed.connect(self.detail.refresh)
        grid.grid.gpuSelected.connect(self.detail.show_gpu)
        grid.grid.gpuSelected.connect(self._on_gpu_selected)  # the node's healing policy
        session.replay.momentChanged.connect(self._on_replay_moment_changed)
        self._followed_s = 0.0  # when the plots last moved to a moment (monotonic)
        self._wanted_ms: int | None = None
        self._follow = named_timer(self.detail, "gpufleet-plots-follow", self._on_follow_timeout,
                                   single_shot=True)  # fmt: skip

    def _on_replay_moment_changed(self, at_ms: int | None) -> None:
        self._wanted_ms = at_ms
        if at_ms is None:  # live: at once
            self._follow.stop()
            self.detail.plots.show_moment(None)
        elif not self._follow.isActive():
            due_ms = (self._followed_s - time.monotonic()) * 1000 + FOLLOW_MS
            self._follow.start(max(0, round(due_ms)))

    def _on_follow_timeout(self) -> None:
        # Not once the session has stopped (the console closing): a plot moved then would
        # ask history of a network that is gone.
        if self._wanted_ms is not None and self._session.pump.running:
            self._followed_s = time.monotonic()
            self.detail.plots.show_moment(self._wanted_ms / 1000)

    def _on_gpu_selected(self, target: str, _gpu: int) -> None:
        self._session.health.policy(target)  # asked again each time: a reload may change it
