"""What each step of the guided tour points at in the window, and what it opens first."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QWidget

from console.views.alerts.part import AlertsPart
from console.views.common.scroll_into_view import scroll_into_view
from console.views.control.part import ControlPart
from console.views.detail.gpu_detail import GpuDetailPanel
from console.views.grid.part import GridPart
from console.views.window.guided_tour import Target


def tour_targets(
    grid: GridPart,
    detail: GpuDetailPanel,
    alerts: AlertsPart,
    control: ControlPart,
    show_tab: Callable[[QWidget], None],
) -> dict[str, Target]:
    """tour_steps.py's parts by name: (the widgets ringed, what to do first)."""
    panel = alerts.alert_panel

    def stay() -> None:
        pass

    return {
        "grid": (lambda: [grid.fleet_scroll], stay),
        "search": (lambda: [grid.search], stay),
        "alerts": (lambda: [panel.table], alerts.show_alerts),
        "acknowledge": (lambda: [panel.acknowledge, panel.silence], alerts.show_alerts),
        "time": (
            lambda: [detail.plot_panel.bar],
            lambda: scroll_into_view(detail.plot_panel.bar),
        ),
        "reserve": (lambda: [control.people_panel], lambda: show_tab(control.people_panel)),
        # A viewer has no kill zone: the process table, where the kill would start.
        "kill": (
            lambda: [detail.kill_zone, detail.process_table],
            lambda: scroll_into_view(detail.kill_zone),
        ),
        "status": (lambda: [grid.summary], stay),
    }
