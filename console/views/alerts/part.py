"""AlertsPart: alerts, silences, events, toasts and the on-call's notifications.

It builds the alert and silence tables (one tab), the event log, the toast over
the tiles and the notifier that feeds the desktop's sinks, and wires what people
do there (acknowledge, silence, expire) to the daemons, or to the fleet model for
the console's own alerts (a node not responding). Reminders (a silence ending, a
credential about to expire, what self-healing did) come up as toasts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from PySide6.QtCore import QObject
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QApplication, QDialog, QWidget

from console.connections.actions import SilenceActions
from console.fleet.alert_rows import AlertRow
from console.fleet.alerts import EventRow
from console.fleet.credential_expiry import ExpiryAnnouncer, ExpiryNotice
from console.fleet.healing_notices import healing_notices
from console.fleet.node_names import name_nodes
from console.fleet.not_responding import is_local
from console.fleet.notify_settings import NotifySettings
from console.qt.alert_model import AlertTableModel
from console.qt.alert_notifier import AlertNotifier, NotificationSink
from console.qt.credential_reminder import CredentialReminder
from console.qt.event_model import EventLogModel
from console.qt.silence_model import SilenceListings, SilenceReminder, SilenceTableModel
from console.views.alerts.alert_panel import AlertPanel
from console.views.alerts.alerts_tab import AlertsTab
from console.views.alerts.event_log import EventLog
from console.views.alerts.silence_dialog import SilenceDialog
from console.views.alerts.silence_panel import SilencePanel
from console.views.alerts.silence_prompts import SilencePrompts
from console.views.alerts.toast import Toast
from console.views.common.frame import WindowFrame


class AlertsPart(QObject):
    def __init__(self, frame: WindowFrame, sinks: Sequence[NotificationSink],
                 notify: NotifySettings | None, credentials_tab: QWidget) -> None:  # fmt: skip
        super().__init__()
        window = frame.window()
        self._frame, self._credentials_tab = frame, credentials_tab
        session = self._session = frame.session
        fleet = session.fleet
        # Owned by the window: its refresh timer dies with it, never firing into a wrapper
        # Python already collected ("Slot 'AlertTableModel::' not found" in a later test).
        self.alert_model = AlertTableModel(fleet)
        self.alert_model.setParent(window)
        self.alert_panel = AlertPanel(self.alert_model)
        self.silence_model = SilenceTableModel(fleet, parent=window)
        self.silence_panel = SilencePanel(self.silence_model)
        self.alerts_tab = AlertsTab(self.alert_panel, self.silence_panel)
        self.silence_listings = SilenceListings(fleet, session.queries, window)
        self.silence_reminder = SilenceReminder(fleet, parent=window)
        announcer = ExpiryAnnouncer(session.profile, session.connections.refreshes_token)
        self.credential_reminder = CredentialReminder(fleet, announcer, parent=window)
        silences = SilenceActions(session.connections, session.actions.actor)
        self.silence_prompts = SilencePrompts(fleet, silences, window)
        self.event_model = EventLogModel(self.node_name)
        self.event_log = EventLog(self.event_model)
        self.toast = Toast(window)
        self.sinks = list(sinks)
        self.notifier = AlertNotifier(
            fleet, self.toast.show_alert, list(sinks), QApplication.beep, notify
        )
        self.mute = QAction("Mute sound", window, checkable=True)
        self._wire()

    def _wire(self) -> None:
        pump, frame = self._session.pump, self._frame
        pump.fleetChanged.connect(self.alert_model.on_fleet_changed)
        pump.fleetChanged.connect(self.silence_model.on_fleet_changed)
        pump.fleetChanged.connect(self.silence_listings.on_fleet_changed)
        pump.eventsArrived.connect(self.event_model.add_events)
        pump.eventsArrived.connect(self.notifier.on_events_arrived)
        pump.eventsArrived.connect(self._on_events_arrived)  # self-healing's notices
        # Held popups are released by time, not events: a tick each frame with news.
        pump.fleetChanged.connect(self.notifier.tick)
        frame.access.operatorRefusalChanged.connect(self.alert_panel.set_action_refusal)
        frame.access.operatorRefusalChanged.connect(self.silence_panel.set_action_refusal)
        # A toast, a notification or an alert row opens its GPU.
        self.alert_panel.gpuRequested.connect(frame.open_gpu)
        self.toast.clicked.connect(self.open_alert)
        # The toast follows its notice as the desktop's does: reworded, withdrawn.
        self.notifier.noticeShown.connect(self.toast.on_notice_shown)
        self.notifier.noticeUpdated.connect(self.toast.on_notice_updated)
        self.notifier.noticeWithdrawn.connect(self.toast.on_notice_withdrawn)
        self.notifier.activated.connect(self.open_alert)
        for sink in self.sinks:
            activated = getattr(sink, "activated", None)
            if activated is not None:
                activated.connect(self.notifier.on_sink_activated)
        self.alert_panel.acknowledgeRequested.connect(self._on_acknowledge_requested)
        self.alert_panel.silenceRequested.connect(self._on_silence_requested)
        # Silences: the panel and an alert's Silence… ask SilencePrompts; reminders toast.
        self.silence_panel.newRequested.connect(self.silence_prompts.ask_new)
        self.silence_panel.expireRequested.connect(self.silence_prompts.ask_expire)
        self.silence_prompts.message.connect(frame.show_message)
        self.silence_reminder.reminderDue.connect(self._on_silence_reminder_due)
        self.toast.noticeClicked.connect(self.show_topic)
        # A token about to expire: a toast and the message line, once per threshold.
        self.credential_reminder.noticeDue.connect(self._on_credential_notice_due)
        self.mute.toggled.connect(self._on_mute_toggled)

    def withdraw_all(self) -> None:
        """On quit: the desktop notifications this console raised go with it."""
        for sink in self.sinks:
            withdraw_all = getattr(sink, "withdraw_all", None)
            if sink.available and withdraw_all is not None:
                withdraw_all()

    def tabs(self) -> list[tuple[QWidget, str]]:
        return [(self.alerts_tab, "Alerts"), (self.event_log, "Events")]

    def node_name(self, target: str) -> str:
        return self.notifier.node_name(target)

    def open_alert(self, target: str, alert_id: str) -> None:
        if not target and alert_id.startswith("reminder-"):  # AlertNotifier.remind's notices
            self.show_topic("silences")
            return
        alert = self._session.fleet.live_alerts.alert(target, alert_id)  # a notice is live
        if alert is not None and alert.gpu_index is not None:
            self._frame.open_gpu(target, alert.gpu_index)
        self.show_alerts()

    def show_alerts(self, severity: str | None = None) -> None:
        self._frame.show_tab(self.alerts_tab)
        self.alerts_tab.show_alerts()
        if severity is not None:
            self.alert_panel.filter.setText(severity)

    def show_topic(self, topic: str) -> None:
        """Where a notice leads: credentials, self-healing's events, or the silences."""
        if topic == "credentials":  # who we are on each node, until when
            self._frame.show_tab(self._credentials_tab)
        elif topic == "events":  # what self-healing did
            self._frame.show_tab(self.event_log)
        else:
            self._frame.show_tab(self.alerts_tab)
            self.alerts_tab.show_silences()

    def _on_acknowledge_requested(self, alert: AlertRow) -> None:
        # The console's own alerts (a node not responding) are acknowledged here only.
        if not self._session.fleet.acknowledge_local(alert, self._session.actions.actor):
            self._session.actions.acknowledge(alert)

    def _on_silence_requested(self, alert: AlertRow) -> None:
        if not is_local(alert):  # a node's alert: a matcher silence, prefilled from it
            self.silence_prompts.ask_new(alert)
            return
        dialog = SilenceDialog(alert.summary, self._frame.window())
        if dialog.exec() == QDialog.DialogCode.Accepted:
            reason, actor = dialog.reason.text().strip(), self._session.actions.actor
            if not self._session.fleet.silence_local(alert, dialog.duration_s, actor, reason):
                self._session.actions.silence(alert, dialog.duration_s, reason)

    def _on_silence_reminder_due(self, text: str) -> None:
        text = name_nodes(self._session.fleet, text)
        self.toast.show_notice("Silence ending", text, "silences")
        self.notifier.remind("Silence ending", text)

    def _on_events_arrived(self, events: list[EventRow]) -> None:
        for notice in healing_notices(events, self.node_name):
            self.toast.show_notice(notice.title, notice.body, "events", notice.places)
            self.notifier.remind(notice.title, notice.body)

    def _on_credential_notice_due(self, notice: ExpiryNotice) -> None:
        notice = dataclasses.replace(notice, body=name_nodes(self._session.fleet, notice.body))
        self.toast.show_notice(notice.title, notice.body, "credentials")
        self._frame.show_message(notice.body)

    def _on_mute_toggled(self, muted: bool) -> None:
        self.notifier.muted = muted
        for sink in self.sinks:
            if hasattr(sink, "muted"):
                sink.muted = muted
