"""WindowLooks: a window's theme, wall mode, View menu and remembered layout, together.

Built once per window at start (console/app.py). The layout and choices are
restored from the profile's layout file (console/qt/ui_state.py) before the
window shows and saved when it closes. The theme comes from the settings'
`theme` unless a person picked one in the View menu, which is then remembered
and wins at the next start.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QMainWindow

from console.fleet.time_range import PRESETS
from console.qt import ui_state
from console.views.plots.gpu_plots import GpuPlots
from console.views.window.looks import Looks
from console.views.window.view_menu import ViewMenu
from console.views.window.wall_mode import WallMode

log = logging.getLogger(__name__)
PRESET_SPANS = {preset.span_s for preset in PRESETS}


class WindowLooks(QObject):
    def __init__(
        self,
        window: QMainWindow,
        profile: str = "",
        theme: str = "auto",
        wall: bool = False,
        first_start: Callable[[], object] | None = None,
    ) -> None:
        """`first_start` lays the window out where no layout was saved (before wall mode)."""
        super().__init__(window)
        self.setObjectName("gpufleet-window-looks")
        self._window = window
        self.path = ui_state.state_path(profile)
        self.saved = ui_state.load(self.path)
        self.looks = Looks(window, self.saved.theme or theme)
        self.looks.picked = self.saved.theme is not None
        self.wall = WallMode(window, self.looks)
        self.menu = ViewMenu(window, self.looks, self.wall)
        self._restore()
        if first_start is not None and not self.saved.geometry:
            first_start()
        window.installEventFilter(self)
        if wall:
            self.wall.set_on(True)

    def _plots(self) -> GpuPlots | None:
        return self._window.findChild(GpuPlots, "gpuPlots")

    def _restore(self) -> None:
        ui_state.restore(self._window, self.saved)
        plots = self._plots()
        if plots is not None and self.saved.span_s in PRESET_SPANS:
            plots.choose_span(float(self.saved.span_s))

    def capture(self) -> ui_state.UiState:
        state = ui_state.capture(self._window)
        if self.wall.on:  # full screen for the wall: keep the desk's geometry for next time
            state.geometry, state.window_state = self.saved.geometry, self.saved.window_state
        plots = self._plots()
        if plots is not None and plots.window.live and plots.window.custom is None:
            state.span_s = plots.window.span_s
        state.theme = self.looks.choice if self.looks.picked else None
        return state

    def save(self) -> None:
        ui_state.save(self.path, self.capture())
        log.debug("window layout saved to %s", self.path)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self._window and event.type() == QEvent.Type.Close:
            self.save()
        return False
