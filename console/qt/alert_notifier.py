"""AlertNotifier: puts what the notify policy lets through in front of a person.

The policy (console/fleet/notify_policy.py) decides which alerts pop up, when,
and grouped how; this shows each notice in the in-window toast and on the first
available of the other channels: the desktop's notification server, else the
system tray (on Linux the tray goes to the same server, so both would pop up
twice). Critical ones make a sound unless muted: the notification server's, or
a beep where the channel plays none. A notice is withdrawn from the desktop
when every alert it stands for is cleared, acknowledged or silenced; one the
policy words anew (a flapping critical's count) is replaced in place, without
sound. `noticeWithdrawn` and `noticeUpdated` say so to the in-window toast.

Driven by the frame pump, never by a timer of its own: `on_events_arrived`
with each frame's new events, and `tick` once a frame, so a held popup is
released on time without new events. Nothing here waits on anything.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from PySide6.QtCore import QObject, Signal

from console.fleet.alert_rows import AlertRow
from console.fleet.alerts import EventRow
from console.fleet.model import FleetModel
from console.fleet.notify_policy import Decisions, Notice, NoticeKind, NotifyPolicy
from console.fleet.notify_settings import NotifySettings
from gpufleet.v1.alert_severity import Severity


class NotificationSink(Protocol):
    """A channel; one may also have `show_notice(Notice)`, `withdraw`, `muted`."""

    @property
    def available(self) -> bool: ...

    def show(self, alert: AlertRow, node_name: str) -> None: ...


class AlertNotifier(QObject):
    """Fed once per frame with new events (FramePump.eventsArrived), ticked every frame."""

    activated = Signal(str, str)  # target, alert id: "open that GPU"
    notified = Signal(object)  # AlertRow, after it was shown (each alert of a notice)
    noticeShown = Signal(object)  # Notice, after it was shown
    noticeUpdated = Signal(object)  # Notice, shown before, in new words (same uid)
    noticeWithdrawn = Signal(object)  # Notice, after it was withdrawn

    def __init__(
        self,
        fleet: FleetModel,
        show_toast: Callable[[AlertRow, str], None],
        sinks: list[NotificationSink],
        beep: Callable[[], None],
        settings: NotifySettings | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__()
        self.setObjectName("gpufleet-alert-notifier")
        self._fleet, self._show_toast, self._sinks, self._beep = fleet, show_toast, sinks, beep
        self._clock = clock
        current = lambda uid: fleet.live_alerts.alert(*uid)  # noqa: E731
        self.policy = NotifyPolicy(settings or NotifySettings(), current, self.node_name)
        self.muted = False
        self._reminders = 0

    def remind(self, headline: str, body: str) -> None:
        """A notice that is no alert (a silence about to end) on the desktop; no sound.

        The caller shows its own toast; the tray, a channel of alerts only, gets none.
        """
        self._reminders += 1
        notice = Notice(("", f"reminder-{self._reminders}"), NoticeKind.REMINDER,
                        Severity.WARNING, headline, body, ())  # fmt: skip
        sink = next((s for s in self._sinks if s.available), None)
        show_notice = getattr(sink, "show_notice", None)
        if show_notice is not None:
            show_notice(notice)
            self.noticeShown.emit(notice)

    def on_events_arrived(self, events: list[EventRow]) -> None:
        self._carry_out(self.policy.feed(events, self._clock()))

    def tick(self, *_frame: object) -> None:
        """Once a frame (any argument a frame signal carries is ignored)."""
        self._carry_out(self.policy.tick(self._clock()))

    def _carry_out(self, decisions: Decisions) -> None:
        for notice in decisions.withdraw:
            self._withdraw(notice)
        for notice in decisions.update:
            self._update(notice)
        for notice in decisions.show:
            self._popup(notice)

    def _popup(self, notice: Notice) -> None:
        anchor = notice.anchor
        node = self.node_name(anchor.target) if anchor is not None else ""
        sink = next((s for s in self._sinks if s.available), None)
        if notice.kind is NoticeKind.ALERT and anchor is not None:
            self._show_toast(anchor, self.title(anchor, node))
            if sink is not None:
                sink.show(anchor, node)
        else:
            self._show_toast(self._stand_in(notice), notice.headline)
            if sink is not None:
                self._show_notice(sink, notice, node)
        # A channel with its own `muted` setting plays the sound itself.
        plays_sound = sink is not None and hasattr(sink, "muted")
        if notice.severity is Severity.CRITICAL and not self.muted and not plays_sound:
            self._beep()
        if notice.kind in (NoticeKind.ALERT, NoticeKind.GROUP):
            for alert in notice.alerts:
                self.notified.emit(alert)
        self.noticeShown.emit(notice)

    def _show_notice(self, sink: NotificationSink, notice: Notice, node: str) -> None:
        show_notice = getattr(sink, "show_notice", None)
        if show_notice is not None:
            show_notice(notice)
        elif notice.anchor is not None:  # a channel that shows only alerts: the anchor's
            sink.show(replace(notice.anchor, summary=f"{notice.headline}\n{notice.body}"), node)

    def _withdraw(self, notice: Notice) -> None:
        for sink in self._sinks:
            if not sink.available:
                continue
            if notice.kind is NoticeKind.ALERT and notice.anchor is not None:
                withdraw = getattr(sink, "withdraw", None)
                if withdraw is not None:
                    withdraw(notice.anchor)
            elif (withdraw_notice := getattr(sink, "withdraw_notice", None)) is not None:
                withdraw_notice(notice)
        self.noticeWithdrawn.emit(notice)

    def _update(self, notice: Notice) -> None:
        """New words for a notice on show: in place where the channel can, never a new popup."""
        for sink in self._sinks:
            update_notice = getattr(sink, "update_notice", None)
            if sink.available and update_notice is not None:
                update_notice(notice)
        self.noticeUpdated.emit(notice)

    def _stand_in(self, notice: Notice) -> AlertRow:
        """The toast shows an alert: the notice's first one, in the notice's words."""
        anchor = notice.anchor or AlertRow(
            "", notice.uid[1], "", "", notice.severity, True, None, "", None, None, "",
            "", 0, 0, None, 0, "", None, None, "", "",
        )  # fmt: skip
        return replace(anchor, severity=notice.severity, summary=notice.body)

    def node_name(self, target: str) -> str:
        return self._fleet.name_of(target)

    @staticmethod
    def title(alert: AlertRow, node: str) -> str:
        where = node if alert.gpu_index is None else f"{node} GPU {alert.gpu_index}"
        return f"{alert.severity.label.upper()} · {where}"

    def on_sink_activated(self, target: str, alert_id: str) -> None:
        """A click on a notification: a notice of several alerts opens its first GPU's."""
        self.activated.emit(*(self.policy.anchor((target, alert_id)) or (target, alert_id)))
