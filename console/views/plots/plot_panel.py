"""PlotPanel: the GPU detail's plots under their time-range bar, scrolling when short.

The plots keep a minimum height each (GpuPlots.MIN_PLOT_HEIGHT); a panel
shorter than that (a tall bottom dock, a 1366x768 screen) scrolls instead of
squeezing them. The right-click menu replaces pyqtgraph's (raw epoch seconds).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QDialog, QMenu, QMessageBox, QVBoxLayout, QWidget

from console.fleet.columns import shown
from console.fleet.time_range import TimeWindow
from console.views.common.csv_export import ask_csv_path, write_csv
from console.views.common.scroll_area import vertical_scroll
from console.views.plots.gpu_plots import MIN_PLOT_HEIGHT, SPACING, GpuPlots
from console.views.plots.plot_export import visible_csv
from console.views.plots.time_range_bar import TimeRangeBar
from console.views.plots.time_range_dialog import TimeRangeDialog


class PlotPanel(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("plotPanel")
        self.bar = TimeRangeBar()
        self.plots = GpuPlots()
        self.scroll_area = vertical_scroll("plotScroll", self.plots)
        # Two plots always in sight: the detail's other parts give way before the plots do.
        self.scroll_area.setMinimumHeight(2 * (MIN_PLOT_HEIGHT + SPACING) + SPACING)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.bar)
        layout.addWidget(self.scroll_area, stretch=1)
        # Wiring: the bar asks, the plots decide, the bar shows what they decided.
        self.bar.spanChosen.connect(self.plots.choose_span)
        self.bar.liveToggled.connect(self.plots.set_live)
        self.bar.customRequested.connect(self._on_bar_custom_requested)
        self.plots.windowChanged.connect(self._on_plots_window_changed)
        self.plots.menuRequested.connect(self._on_plots_menu_requested)
        self.bar.show_window(self.plots.window)

    def _on_plots_window_changed(self, window: TimeWindow) -> None:
        self.bar.show_window(window)

    def custom_dialog(self) -> TimeRangeDialog:
        start, end = self.plots.visible_range()
        return TimeRangeDialog(start, end, self)

    def _on_bar_custom_requested(self) -> None:
        dialog = self.custom_dialog()
        if dialog.exec() == QDialog.DialogCode.Accepted:
            self.plots.choose_custom(*dialog.chosen())
        self.bar.show_window(self.plots.window)  # cancelled: the button goes back

    def context_menu(self) -> QMenu:
        """Reset zoom, Live, Export CSV of the visible range."""
        menu = QMenu(self)
        menu.setObjectName("plotMenu")
        menu.addAction("Reset zoom", self.plots.reset_zoom)
        live = menu.addAction("Live", lambda: self.plots.set_live(True))
        live.setEnabled(not self.plots.window.live)
        menu.addSeparator()
        menu.addAction("Export visible range as CSV…", self._export_csv)
        return menu

    def _on_plots_menu_requested(self, where: QPoint) -> None:
        menu = self.context_menu()
        menu.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        menu.popup(where)

    def visible_csv(self) -> str:
        """The samples the plots hold within the visible range, as CSV text."""
        start, end = self.plots.visible_range()
        curves = self.plots.curves
        times, _ = next(iter(curves.values())).getOriginalDataset()
        times = np.asarray(times if times is not None else [], dtype=np.float64)
        columns = []
        for metric, curve in curves.items():
            _, values = curve.getOriginalDataset()
            how = shown(metric)
            values = np.asarray(values if values is not None else [], dtype=np.float64)
            columns.append((f"{how.label} ({how.unit})", values))
        return visible_csv(start, end, times, columns)

    def _export_csv(self) -> None:
        path = ask_csv_path(self, "Export the plots' visible range", "plots")
        if not path:
            return
        error = write_csv(Path(path), self.visible_csv())
        if error is not None:
            QMessageBox.warning(self, "Export", f"Could not write {path}: {error}")
