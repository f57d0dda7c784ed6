"""MainWindow: composes the wings' parts around the grid. No business logic, no RPC.

Each wing under console/views/ has a part that builds its models, panels and
prompts and wires itself to the frame pump, the grid's extension points and this
window (a WindowFrame: the message line, the bottom tabs, opening a GPU).
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QCloseEvent, QResizeEvent, QShowEvent
from PySide6.QtWidgets import QDockWidget, QMainWindow, QTabWidget, QVBoxLayout, QWidget

from console.fleet.node_names import name_nodes
from console.fleet.notify_settings import NotifySettings
from console.fleet.updates import CommandResult
from console.qt import ui_state
from console.qt.access_watcher import AccessWatcher
from console.qt.alert_notifier import NotificationSink
from console.session import ConsoleSession
from console.views.alerts.part import AlertsPart
from console.views.control.part import ControlPart
from console.views.detail.part import DetailPart
from console.views.grid.part import GridPart
from console.views.replay.part import ReplayPart
from console.views.reports.part import ReportsPart
from console.views.slurm.part import SlurmPart
from console.views.window.file_menu import FileMenu
from console.views.window.first_layout import share_out
from console.views.window.help_menu import HelpMenu
from console.views.window.tour_targets import tour_targets
from console.views.window.window_keys import WindowKeys

MESSAGE_MS = 10_000


class MainWindow(QMainWindow):
    def __init__(
        self,
        session: ConsoleSession,
        sinks: Sequence[NotificationSink] = (),
        notify: NotifySettings | None = None,
    ) -> None:
        super().__init__()
        self.setObjectName("mainWindow")
        profile = f" — {session.profile}" if session.profile else ""
        self.setWindowTitle(f"GPU Fleet Console{profile}")
        self.session = session
        self.access = AccessWatcher(session.fleet)
        self.tabs = QTabWidget()
        # Every command's answer on the message line; a prompt's own words may follow.
        session.pump.commandFinished.connect(self._on_command_finished)
        self.grid_part = GridPart(self)
        self.grid = self.grid_part.grid
        self.detail_part = DetailPart(self, self.grid_part)
        self.detail = self.detail_part.detail
        self.reports = ReportsPart(self)
        # The time cursor: the whole console at a past moment; Share names the detail's GPU.
        self.replay = ReplayPart(self, lambda: self.detail.key)
        self.alerts = AlertsPart(self, sinks, notify, self.reports.inventory_panel)
        self.control = ControlPart(self, self.grid_part, self.detail_part)
        # With the profile's Slurm: its queue, drops, drain/resume and job cancels.
        link, slurm_actions = session.slurm_link, session.slurm_actions
        self.slurm = (SlurmPart(session.fleet, session.pump, (link, slurm_actions),
                                 self.grid_part.drop_rules, self.grid, self.detail, self)
                      if link is not None and slurm_actions is not None else None)  # fmt: skip
        # Roles: offer only what WhoAmI says we may do; the daemons still decide.
        session.pump.fleetChanged.connect(self.access.on_fleet_changed)
        summary = self.grid_part.summary
        summary.alertsRequested.connect(self.alerts.show_alerts)
        summary.nodesRequested.connect(self._on_nodes_requested)
        self._shared_out = False  # the docks' first sizes (showEvent)
        self._compose()
        self.file_menu = FileMenu(self)  # File, Quit (Ctrl+Q): as closing the window
        # Keyboard: the window's shortcuts (F1 lists them with every other key).
        self.keys = WindowKeys(self, self.grid, self.tabs, self.detail.process_table,
                               self.alerts.mute, self.grid_part.search.focus)  # fmt: skip
        # Help, the guided tour (its first showing: console/app.py), the list of keys.
        targets = tour_targets(
            self.grid_part, self.detail, self.alerts, self.control, self.show_tab
        )
        self.help_menu = HelpMenu(self, targets, self.keys.show_shortcuts)

    def _compose(self) -> None:
        # Over tiles, not rows; and off the tiles of the GPU (or node) it is about, which
        # move with a scroll, a resize or a new layout (a frame's news may sort them anew).
        toast, scroll = self.alerts.toast, self.grid_part.fleet_scroll
        toast.set_anchor(scroll, self._tiles_of)
        for bar in (scroll.verticalScrollBar(), scroll.horizontalScrollBar()):
            bar.valueChanged.connect(self._place_toast)  # only while one is shown
        self.session.pump.fleetChanged.connect(self._place_toast)
        # The grid, the replay banner over it and the time cursor's strip under it.
        central = QWidget()
        central.setObjectName("gridArea")
        column = QVBoxLayout(central)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(0)
        for widget in (self.replay.banner, self.grid_part.fleet_scroll, self.replay.strip):
            column.addWidget(widget, 1 if widget is self.grid_part.fleet_scroll else 0)
        self.setCentralWidget(central)
        # The GPU detail beside the grid, the whole height (its plots in view on a short
        # screen); the alert list under the grid only (console/views/window/first_layout.py).
        self.detail_dock = QDockWidget("GPU detail", self)
        self.detail_dock.setObjectName("detailDock")  # remembered by name (ui_state.py)
        self.detail_dock.setWidget(self.detail_part.detail_scroll)
        self.detail_dock.setFeatures(QDockWidget.DockWidgetFeature.NoDockWidgetFeatures)
        self.detail_dock.setTitleBarWidget(QWidget())  # its title is the GPU's name
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.detail_dock)
        for corner in (Qt.Corner.TopRightCorner, Qt.Corner.BottomRightCorner):
            self.setCorner(corner, Qt.DockWidgetArea.RightDockWidgetArea)
        self.tabs.setObjectName("bottomTabs")
        workloads: QWidget = self.control.workload_panel
        if self.slurm is not None:
            workloads = self.slurm.workloads_tab(workloads)
        people, reservations = self.control.tabs()
        tabs = [*self.alerts.tabs(), (workloads, "Workloads"), people, *self.reports.tabs(),
                reservations]  # fmt: skip
        for tab, title in tabs:
            self.tabs.addTab(tab, title)
        # Admin only: shown once a node takes us as admin (AccessWatcher).
        self.tabs.setTabVisible(self.tabs.indexOf(self.reports.audit_panel), False)
        dock = self.alert_dock = QDockWidget(
            "Alerts, events, workloads, people, inventory, usage, audit", self
        )
        dock.setObjectName("alertDock")
        dock.setWidget(self.tabs)
        dock.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetMovable)
        self.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, dock)
        toolbar = self.grid_part.toolbar()
        toolbar.addAction(self.alerts.mute)
        self.addToolBar(toolbar)
        self.statusBar().addPermanentWidget(self.grid_part.summary)

    def open_gpu(self, target: str, gpu: int) -> None:
        self.grid_part.reveal(target, gpu)
        self.activateWindow()
        self.raise_()

    def show_tab(self, tab: QWidget) -> None:
        self.tabs.setCurrentWidget(tab)

    def show_message(self, text: str) -> None:
        """The one place where messages for the user appear (nodes by name, not address)."""
        self.statusBar().showMessage(name_nodes(self.session.fleet, text), MESSAGE_MS)

    def _on_nodes_requested(self) -> None:
        self.show_tab(self.reports.inventory_panel)  # each node's state, and why

    def _on_command_finished(self, result: CommandResult) -> None:
        outcome = result.message if result.ok else f"failed: {result.message}"
        self.show_message(f"{result.what}: {outcome}")

    def _tiles_of(self, place: tuple[str, int | None]) -> list[QRect]:
        """Where a GPU (or a node, for a node's alert) is, in this window."""
        grid = self.grid
        return [QRect(grid.mapTo(self, r.topLeft()), r.size())
                for r in grid.rects_of(*place)]  # fmt: skip

    def _place_toast(self, *_frame: object) -> None:
        if self.alerts.toast.isVisible():
            self.alerts.toast.place()

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if not self._shared_out and not self.property(ui_state.RESTORED):
            # The docks' shares for this window's size, now that it is laid out (before,
            # Qt ignores resizeDocks) and before its first paint; a remembered layout
            # keeps its own.
            self._shared_out = True
            share_out(self, self.docks, self.alerts.alert_panel.table)

    @property
    def docks(self) -> tuple[QDockWidget, QDockWidget]:
        return self.detail_dock, self.alert_dock

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._place_toast()

    def closeEvent(self, event: QCloseEvent) -> None:
        self.alerts.withdraw_all()  # no notification of ours outlives the console
        self.session.stop()
        super().closeEvent(event)
