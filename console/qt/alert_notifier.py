"""AlertNotifier: decides which events reach a person, and through which channels.

Every new warning or critical alert (and every escalation) that is neither
acknowledged nor silenced goes to the in-window toast and to the first
available of the other channels: the desktop's notification server, else the
system tray (on Linux the tray goes to the same server, so both would pop up
twice). Critical ones make a sound unless muted: the notification server's,
or a beep where the channel plays none. Clearing or acknowledging withdraws the desktop
notification. An alert pops up when raised and when it escalates, once, replays included.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from PySide6.QtCore import QObject, Signal

from console.fleet.alerts import AlertRow, EventRow, Severity
from console.fleet.model import FleetModel

_POPUP_KINDS = {"alert_raised", "alert_changed"}
_WITHDRAW_KINDS = {"alert_cleared", "alert_acknowledged", "alert_silenced"}


class NotificationSink(Protocol):
    @property
    def available(self) -> bool: ...

    def show(self, alert: AlertRow, node_name: str) -> None: ...


class AlertNotifier(QObject):
    """Fed once per frame with new events (FramePump.eventsArrived)."""

    activated = Signal(str, str)  # target, alert id: "open that GPU"
    notified = Signal(object)  # AlertRow, after it was shown

    def __init__(
        self,
        fleet: FleetModel,
        show_toast: Callable[[AlertRow, str], None],
        sinks: list[NotificationSink],
        beep: Callable[[], None],
    ) -> None:
        super().__init__()
        self.setObjectName("gpufleet-alert-notifier")
        self._fleet, self._show_toast, self._sinks, self._beep = fleet, show_toast, sinks, beep
        # The highest severity shown per alert: a downgrade (critical -> warning) is no news.
        self._shown: dict[tuple[str, str], Severity] = {}
        self.muted = False

    def on_events_arrived(self, events: list[EventRow]) -> None:
        now_ms = int(time.time() * 1000)
        for event in events:
            if event.alert is None:
                continue
            # Judge by the alert as it is now: a replayed raise of an alert that
            # has cleared since must not pop up.
            current = self._fleet.alerts.alert(event.target, event.alert.id) or event.alert
            if event.kind in _POPUP_KINDS and self._deserves_popup(current, now_ms):
                self._popup(current)
            elif event.kind in _WITHDRAW_KINDS:
                self._withdraw(current)

    def _deserves_popup(self, alert: AlertRow, now_ms: int) -> bool:
        return (
            alert.firing
            and alert.severity >= Severity.WARNING
            and not alert.acknowledged
            and not alert.silenced(now_ms)
            and alert.severity > self._shown.get(alert.uid, Severity.INFO)
        )

    def _popup(self, alert: AlertRow) -> None:
        self._shown[alert.uid] = max(alert.severity, self._shown.get(alert.uid, alert.severity))
        node = self.node_name(alert.target)
        self._show_toast(alert, self.title(alert, node))
        sink = next((s for s in self._sinks if s.available), None)
        if sink is not None:
            sink.show(alert, node)
        # A channel with its own `muted` setting plays the sound itself.
        plays_sound = sink is not None and hasattr(sink, "muted")
        if alert.severity is Severity.CRITICAL and not self.muted and not plays_sound:
            self._beep()
        self.notified.emit(alert)

    def _withdraw(self, alert: AlertRow) -> None:
        for sink in self._sinks:
            withdraw = getattr(sink, "withdraw", None)
            if withdraw is not None and sink.available:
                withdraw(alert)

    def node_name(self, target: str) -> str:
        return self._fleet.name_of(target)

    @staticmethod
    def title(alert: AlertRow, node: str) -> str:
        where = node if alert.gpu_index is None else f"{node} GPU {alert.gpu_index}"
        return f"{alert.severity.label.upper()} · {where}"

    def on_sink_activated(self, target: str, alert_id: str) -> None:
        self.activated.emit(target, alert_id)
