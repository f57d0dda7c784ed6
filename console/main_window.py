"""MainWindow: composes the views and wires their signals. No business logic, no RPC."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QCloseEvent, QKeySequence, QResizeEvent
from PySide6.QtWidgets import (
    QApplication,
    QComboBox,
    QDialog,
    QDockWidget,
    QLabel,
    QMainWindow,
    QScrollArea,
    QSplitter,
    QTabWidget,
    QToolBar,
)

from console.connections.actions import SilenceActions
from console.fleet.alerts import AlertRow, EventRow
from console.fleet.credential_expiry import ExpiryAnnouncer, ExpiryNotice
from console.fleet.healing_notices import healing_notices
from console.fleet.node_names import name_nodes
from console.fleet.not_responding import is_local
from console.fleet.notify_settings import NotifySettings
from console.fleet.tile_order import TileOrder
from console.fleet.updates import CommandResult
from console.qt.access_watcher import AccessWatcher
from console.qt.alert_model import AlertTableModel
from console.qt.alert_notifier import AlertNotifier, NotificationSink
from console.qt.audit_model import AuditTableModel
from console.qt.credential_reminder import CredentialReminder
from console.qt.drop_rules import TileDropRules
from console.qt.event_model import EventLogModel
from console.qt.inventory_model import InventoryTableModel
from console.qt.people_model import PeopleListModel
from console.qt.reservation_model import ReservationTableModel
from console.qt.silence_model import SilenceListings, SilenceReminder, SilenceTableModel
from console.qt.usage_model import UsageTableModel
from console.qt.workload_model import WorkloadTableModel
from console.session import ConsoleSession
from console.views.alerts.alert_panel import AlertPanel
from console.views.alerts.alerts_tab import AlertsTab
from console.views.alerts.event_log import EventLog
from console.views.alerts.silence_dialog import SilenceDialog
from console.views.alerts.silence_panel import SilencePanel
from console.views.alerts.silence_prompts import SilencePrompts
from console.views.alerts.toast import Toast
from console.views.control.control_prompts import ControlPrompts
from console.views.control.health_prompts import HealthPrompts
from console.views.control.people_panel import PeoplePanel
from console.views.control.place_prompts import PlacePrompts
from console.views.control.release_prompts import ReleasePrompts
from console.views.control.reservations_panel import ReservationsPanel
from console.views.control.workload_panel import WorkloadPanel
from console.views.detail.gpu_detail import GpuDetailPanel
from console.views.grid.fleet_grid import FleetGrid
from console.views.grid.fleet_summary import FleetSummary
from console.views.grid.grid_layout import GROUPINGS
from console.views.grid.search_box import SearchBox
from console.views.grid.tile_colors import STOPS
from console.views.plots.plot_history import PlotHistory
from console.views.reports.audit_panel import AuditPanel
from console.views.reports.inventory_panel import InventoryPanel
from console.views.reports.usage_panel import UsagePanel
from console.views.slurm.slurm_parts import SlurmParts
from console.views.window.keyboard_menus import open_menus_from_keyboard
from console.views.window.window_keys import WindowKeys

MESSAGE_MS = 10_000
DOCK_HEIGHT = 210


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
        fleet = session.fleet
        self.drop_rules = TileDropRules(fleet)
        self.grid = FleetGrid(session.items, self.drop_rules)
        self.detail = GpuDetailPanel(fleet)
        self.summary = FleetSummary(fleet)
        self.alert_model = AlertTableModel(fleet)
        # Owned by the window: its refresh timer dies with it, never firing into a wrapper
        # Python already collected ("Slot 'AlertTableModel::' not found" in a later test).
        self.alert_model.setParent(self)
        # Plot ranges older than the ring: daemons' history or Prometheus, off the GUI thread.
        prometheus = session.history.prometheus is not None
        self.plot_history = PlotHistory(fleet, session.history, prometheus, parent=self)
        self.detail.plots.use_history(self.plot_history)
        self.alert_panel = AlertPanel(self.alert_model)
        self.silence_model = SilenceTableModel(fleet, parent=self)
        self.silence_panel = SilencePanel(self.silence_model)
        self.alerts_tab = AlertsTab(self.alert_panel, self.silence_panel)
        self.silence_listings = SilenceListings(fleet, session.queries, self)
        self.silence_reminder = SilenceReminder(fleet, parent=self)
        announcer = ExpiryAnnouncer(session.profile, session.connections.refreshes_token)
        self.credential_reminder = CredentialReminder(fleet, announcer, parent=self)
        silences = SilenceActions(session.connections, session.actions.actor)
        self.silence_prompts = SilencePrompts(fleet, silences, self)
        self.event_model = EventLogModel(self._node_name)
        self.event_log = EventLog(self.event_model)
        self.inventory_model = InventoryTableModel(fleet)
        self.inventory_panel = InventoryPanel(self.inventory_model)
        self.workload_model = WorkloadTableModel(fleet)
        self.workload_panel = WorkloadPanel(self.workload_model)
        self.people_model = PeopleListModel(fleet, session.people)
        self.people_panel = PeoplePanel(self.people_model)
        self.reservation_model = ReservationTableModel(fleet, parent=self)
        self.reservations_panel = ReservationsPanel(self.reservation_model)
        self.usage_model = UsageTableModel(fleet, session.queries)
        self.usage_panel = UsagePanel(self.usage_model)
        self.audit_model = AuditTableModel(fleet, session.queries)
        self.audit_panel = AuditPanel(self.audit_model)
        self.access = AccessWatcher(fleet)
        self.prompts = ControlPrompts(fleet, session.control, self, lambda: session.people)
        self.health_prompts = HealthPrompts(fleet, session.health, self)
        self.release_prompts = ReleasePrompts(fleet, session.control, self)
        # Ctrl+Z: undo the last release for a few seconds after it (ReleasePrompts).
        self.undo_release = QAction("Undo release", self, shortcut=QKeySequence("Ctrl+Z"))
        self.addAction(self.undo_release)
        self.place_prompts = PlacePrompts(
            fleet, self.drop_rules, self.prompts, self,
            lambda: self.grid.selection, self._people_names,
        )  # fmt: skip
        self.toast = Toast(self)
        self.notifier = AlertNotifier(
            fleet, self.toast.show_alert, list(sinks), QApplication.beep, notify
        )
        self.sinks = list(sinks)
        self.color_by = QComboBox()
        self.color_by.setObjectName("colorBy")
        self.color_by.addItems([scale.value for scale in STOPS])  # temperature first
        self.group_by = QComboBox()
        self.group_by.setObjectName("groupBy")
        self.group_by.addItems(list(GROUPINGS))
        self.sort_by = QComboBox()
        self.sort_by.setObjectName("sortBy")
        self.sort_by.addItems([order.value for order in TileOrder])  # node order first
        self.search = SearchBox(fleet)
        self.mute = QAction("Mute sound", self, checkable=True)
        self.tabs = QTabWidget()
        # With the profile's Slurm: its queue, drops, drain/resume and job cancels.
        link, slurm_actions = session.slurm_link, session.slurm_actions
        self.slurm = (SlurmParts(fleet, session.pump, (link, slurm_actions), self.drop_rules,
                                 self.grid, self.detail, self)
                      if link is not None and slurm_actions is not None else None)  # fmt: skip
        self._compose()
        self._wire()
        # Keyboard: the window's shortcuts (F1 lists them with every other key).
        self.keys = WindowKeys(
            self, self.grid, self.tabs, self.detail.process_table, self.mute, self.search.focus
        )

    def _compose(self) -> None:
        scroll = QScrollArea()
        scroll.setObjectName("fleetScroll")
        scroll.setWidgetResizable(True)
        scroll.setWidget(self.grid)
        self.fleet_scroll = scroll
        self.toast.set_anchor(scroll)  # over tiles, never over a table's rows
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.setObjectName("mainSplitter")  # remembered by name (console/qt/ui_state.py)
        splitter.addWidget(scroll)
        # The detail (facts, readings, health, plots, processes) scrolls as a whole on a
        # short screen: stacked, it wanted 875 px, more than a 1366x768 window has.
        detail_scroll = QScrollArea()
        detail_scroll.setObjectName("detailScroll")
        detail_scroll.setWidgetResizable(True)
        detail_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        detail_scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        detail_scroll.setWidget(self.detail)
        self.detail_scroll = detail_scroll
        splitter.addWidget(detail_scroll)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 2)
        splitter.setSizes([960, 640])
        self.setCentralWidget(splitter)
        self.tabs.setObjectName("bottomTabs")
        self.tabs.addTab(self.alerts_tab, "Alerts")
        self.tabs.addTab(self.event_log, "Events")
        workloads = self.slurm.workloads_tab(self.workload_panel) if self.slurm else None
        self.tabs.addTab(workloads or self.workload_panel, "Workloads")
        self.tabs.addTab(self.people_panel, "People")
        self.tabs.addTab(self.inventory_panel, "Inventory")
        self.tabs.addTab(self.usage_panel, "Usage")
        self.tabs.addTab(self.audit_panel, "Audit")
        self.tabs.addTab(self.reservations_panel, "Reservations")
        # Admin only: shown once a node takes us as admin (AccessWatcher).
        self.tabs.setTabVisible(self.tabs.indexOf(self.audit_panel), False)
        dock = QDockWidget("Alerts, events, workloads, people, inventory, usage, audit", self)
        dock.setObjectName("alertDock")
        dock.setWidget(self.tabs)
        dock.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetMovable)
        self.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, dock)
        self.resizeDocks([dock], [DOCK_HEIGHT], Qt.Orientation.Vertical)
        toolbar = QToolBar("View")
        toolbar.setObjectName("viewToolbar")
        toolbar.addWidget(QLabel(" Colour by "))
        toolbar.addWidget(self.color_by)
        toolbar.addWidget(QLabel(" Group by "))
        toolbar.addWidget(self.group_by)
        toolbar.addWidget(QLabel(" Sort "))
        toolbar.addWidget(self.sort_by)
        toolbar.addSeparator()
        toolbar.addWidget(self.search)
        toolbar.addSeparator()
        toolbar.addAction(self.mute)
        self.addToolBar(toolbar)
        self.statusBar().addPermanentWidget(self.summary)

    def _wire(self) -> None:
        # Data flows one way: frame pump -> models and views, once per frame.
        pump = self.session.pump
        pump.fleetChanged.connect(self.detail.on_fleet_changed)
        # The plots' refresh takes its frame; the grid's changed blocks wait for the next.
        self.detail.refreshed.connect(self.grid.yield_frame)
        pump.fleetChanged.connect(self.summary.on_fleet_changed)
        pump.fleetChanged.connect(self.alert_model.on_fleet_changed)
        pump.fleetChanged.connect(self.silence_model.on_fleet_changed)
        pump.fleetChanged.connect(self.silence_listings.on_fleet_changed)
        pump.eventsArrived.connect(self.event_model.add_events)
        pump.eventsArrived.connect(self.notifier.on_events_arrived)
        pump.eventsArrived.connect(self._on_pump_events_arrived)  # self-healing's notices
        # Held popups are released by time, not events: a tick each frame with news.
        pump.fleetChanged.connect(self.notifier.tick)
        pump.commandFinished.connect(self._on_command_finished)
        pump.fleetChanged.connect(self.inventory_model.on_fleet_changed)
        pump.fleetChanged.connect(self.workload_model.on_fleet_changed)
        pump.fleetChanged.connect(self.people_model.on_fleet_changed)
        pump.commandFinished.connect(self.prompts.on_command_finished)
        pump.queryFinished.connect(self.usage_model.on_query_finished)
        pump.queryFinished.connect(self.audit_model.on_query_finished)
        self.inventory_panel.message.connect(self.show_message)
        # Roles: offer only what WhoAmI says we may do; the daemons still decide.
        pump.fleetChanged.connect(self.access.on_fleet_changed)
        self.access.changed.connect(self.audit_panel.on_access_changed)
        self.access.changed.connect(self.detail.refresh)
        self.access.adminChanged.connect(self._on_access_admin_changed)
        self.access.operatorRefusalChanged.connect(self.alert_panel.set_action_refusal)
        self.access.operatorRefusalChanged.connect(self.silence_panel.set_action_refusal)
        self.access.operatorRefusalChanged.connect(self.workload_panel.set_action_refusal)
        # Reports: the panels ask, the models query the nodes off the GUI thread.
        self.usage_panel.refreshRequested.connect(self.usage_model.refresh)
        self.usage_panel.message.connect(self.show_message)
        self.audit_panel.refreshRequested.connect(self.audit_model.refresh)
        self.audit_panel.message.connect(self.show_message)
        # Selection: a tile, an alert row, a toast or a notification opens a GPU.
        pump.queryFinished.connect(self.plot_history.on_query_finished)
        self.grid.gpuSelected.connect(self.detail.show_gpu)
        self.grid.gpuSelected.connect(self._on_grid_gpu_selected)  # the node's healing policy
        self.alert_panel.gpuRequested.connect(self.open_gpu)
        self.toast.clicked.connect(self.open_alert)
        self.notifier.activated.connect(self.open_alert)
        for sink in self.sinks:
            activated = getattr(sink, "activated", None)
            if activated is not None:
                activated.connect(self.notifier.on_sink_activated)
        # People's actions go to the daemons; answers come back as CommandResults.
        self.alert_panel.acknowledgeRequested.connect(self._on_alert_panel_acknowledge_requested)
        self.alert_panel.silenceRequested.connect(self._on_alert_panel_silence_requested)
        # Silences: the panel and an alert's Silence… ask SilencePrompts; reminders toast.
        self.silence_panel.newRequested.connect(self.silence_prompts.ask_new)
        self.silence_panel.expireRequested.connect(self.silence_prompts.ask_expire)
        self.silence_prompts.message.connect(self.show_message)
        self.silence_reminder.reminderDue.connect(self._on_silence_reminder_due)
        self.toast.noticeClicked.connect(self._on_toast_notice_clicked)
        # A token about to expire: a toast and the message line, once per threshold.
        self.credential_reminder.noticeDue.connect(self._on_credential_notice_due)
        # Control: drops and menus ask ControlPrompts, which confirms where needed and sends.
        self.grid.workloadDropped.connect(self.prompts.assign)
        self.grid.holderDropped.connect(self.prompts.ask_reserve)
        # Releases ask first, name what is freed, free only what is named, and can be undone.
        self.grid.releaseRequested.connect(self.release_prompts.ask_release_gpu)
        self.reservations_panel.releaseRequested.connect(self.release_prompts.ask_release)
        self.reservations_panel.undoRequested.connect(self.release_prompts.undo_release)
        self.undo_release.triggered.connect(self.release_prompts.undo_release)
        self.release_prompts.undoChanged.connect(self.reservations_panel.show_undo)
        self.release_prompts.message.connect(self.show_message)
        pump.fleetChanged.connect(self.reservation_model.on_fleet_changed)
        pump.commandFinished.connect(self.release_prompts.on_command_finished)
        self.access.operatorRefusalChanged.connect(self.reservations_panel.set_action_refusal)
        self.grid.cancelRequested.connect(self.prompts.ask_cancel)
        self.grid.dropHint.connect(self.show_message)
        # Health: drain or return a GPU, mark it repaired (HealthPrompts asks why first).
        self.grid.drainRequested.connect(self._on_grid_drain_requested)
        self.grid.clearHealthRequested.connect(self.health_prompts.ask_clear)
        self.health_prompts.message.connect(self.show_message)
        self.detail.killRequested.connect(self.prompts.ask_kill)
        self.workload_panel.submitRequested.connect(self.prompts.ask_submit)
        self.workload_panel.cancelRequested.connect(self.prompts.ask_cancel)
        self.workload_panel.outputRequested.connect(self.prompts.show_output)
        self.prompts.message.connect(self.show_message)
        # The keyboard's drops: a menu entry asks PlacePrompts for the other half.
        self.grid.offers_placement = True
        self.grid.assignHereRequested.connect(self.place_prompts.assign_here)
        self.grid.reserveHereRequested.connect(self.place_prompts.reserve_here)
        self.workload_panel.assignRequested.connect(self.place_prompts.assign_workload)
        self.people_panel.reserveRequested.connect(self.place_prompts.reserve_for)
        self.people_panel.releaseRequested.connect(self.place_prompts.release_for)
        self.place_prompts.message.connect(self.show_message)
        open_menus_from_keyboard(self.detail.process_table)  # Menu key: Kill…
        self.color_by.currentTextChanged.connect(self.grid.set_color_by)
        self.group_by.currentTextChanged.connect(self.grid.set_grouping)
        # Finding: the sort, the search box and the status bar's figures lead to a GPU.
        self.sort_by.currentTextChanged.connect(self.grid.set_order)
        self.search.found.connect(self.open_gpu)
        self.search.left.connect(self.grid.setFocus)
        self.summary.gpuRequested.connect(self.open_gpu)
        self.summary.alertsRequested.connect(self._on_summary_alerts_requested)
        self.summary.nodesRequested.connect(self._on_summary_nodes_requested)
        self.mute.toggled.connect(self._on_mute_toggled)

    def _people_names(self) -> list[str]:
        model = self.people_model
        return [model.person(row).name for row in range(model.rowCount())]

    def open_gpu(self, target: str, gpu: int) -> None:
        self.grid.select(target, gpu)
        tile = self.grid.tile_rect(target, gpu)
        if tile is not None:
            self.fleet_scroll.ensureVisible(tile.center().x(), tile.center().y(), 50, 80)
        self.activateWindow()
        self.raise_()

    def open_alert(self, target: str, alert_id: str) -> None:
        if not target and alert_id.startswith("reminder-"):  # AlertNotifier.remind's notices
            self._on_toast_notice_clicked("silences")
            return
        alert = self.session.fleet.alerts.alert(target, alert_id)
        if alert is not None and alert.gpu_index is not None:
            self.open_gpu(target, alert.gpu_index)
        self.tabs.setCurrentWidget(self.alerts_tab)
        self.alerts_tab.show_alerts()

    def _on_alert_panel_acknowledge_requested(self, alert: AlertRow) -> None:
        # The console's own alerts (a node not responding) are acknowledged here only.
        if not self.session.fleet.acknowledge_local(alert, self.session.actions.actor):
            self.session.actions.acknowledge(alert)

    def _on_alert_panel_silence_requested(self, alert: AlertRow) -> None:
        if not is_local(alert):  # a node's alert: a matcher silence, prefilled from it
            self.silence_prompts.ask_new(alert)
            return
        dialog = SilenceDialog(alert.summary, self)
        if dialog.exec() == QDialog.DialogCode.Accepted:
            reason, actor = dialog.reason.text().strip(), self.session.actions.actor
            if not self.session.fleet.silence_local(alert, dialog.duration_s, actor, reason):
                self.session.actions.silence(alert, dialog.duration_s, reason)

    def _on_summary_alerts_requested(self, severity: str) -> None:
        self.tabs.setCurrentWidget(self.alerts_tab)
        self.alerts_tab.show_alerts()
        self.alert_panel.filter.setText(severity)

    def _on_summary_nodes_requested(self) -> None:
        self.tabs.setCurrentWidget(self.inventory_panel)  # each node's state, and why

    def _on_silence_reminder_due(self, text: str) -> None:
        text = name_nodes(self.session.fleet, text)
        self.toast.show_notice("Silence ending", text, "silences")
        self.notifier.remind("Silence ending", text)

    def _on_grid_gpu_selected(self, target: str, _gpu: int) -> None:
        self.session.health.policy(target)  # asked again each time: a reload may change it

    def _on_grid_drain_requested(self, target: str, gpu: int, drain: bool) -> None:
        if drain:
            self.health_prompts.ask_drain(target, gpu)
        else:
            self.health_prompts.undrain(target, gpu)

    def _on_pump_events_arrived(self, events: list[EventRow]) -> None:
        for notice in healing_notices(events, self._node_name):
            self.toast.show_notice(notice.title, notice.body, "events")
            self.notifier.remind(notice.title, notice.body)

    def _on_credential_notice_due(self, notice: ExpiryNotice) -> None:
        notice = dataclasses.replace(notice, body=name_nodes(self.session.fleet, notice.body))
        self.toast.show_notice(notice.title, notice.body, "credentials")
        self.show_message(notice.body)

    def _on_toast_notice_clicked(self, topic: str) -> None:
        if topic == "credentials":  # who we are on each node, until when
            self.tabs.setCurrentWidget(self.inventory_panel)
            return
        if topic == "events":  # what self-healing did
            self.tabs.setCurrentWidget(self.event_log)
            return
        self.tabs.setCurrentWidget(self.alerts_tab)
        self.alerts_tab.show_silences()

    def _on_access_admin_changed(self, admin: bool) -> None:
        self.tabs.setTabVisible(self.tabs.indexOf(self.audit_panel), admin)

    def _on_command_finished(self, result: CommandResult) -> None:
        self.show_message(
            f"{result.what}: " + (result.message if result.ok else f"failed: {result.message}")
        )

    def show_message(self, text: str) -> None:
        """The one place where messages for the user appear (nodes by name, not address)."""
        self.statusBar().showMessage(name_nodes(self.session.fleet, text), MESSAGE_MS)

    def _on_mute_toggled(self, muted: bool) -> None:
        self.notifier.muted = muted
        for sink in self.sinks:
            if hasattr(sink, "muted"):
                sink.muted = muted

    def _node_name(self, target: str) -> str:
        return self.notifier.node_name(target)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if self.toast.isVisible() and self.toast.alert is not None:
            self.toast.show_alert(self.toast.alert, self.toast.title.text())

    def closeEvent(self, event: QCloseEvent) -> None:
        self.session.stop()
        super().closeEvent(event)
