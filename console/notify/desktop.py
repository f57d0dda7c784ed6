"""Alerts as freedesktop desktop notifications, over D-Bus (org.freedesktop.Notifications).

Every D-Bus call here is asynchronous: ``show()`` and ``withdraw()`` send and return,
and the replies come back through ``QDBusPendingCallWatcher`` on the GUI thread. The
exceptions: ``available`` asked before the start-up queries were answered waits for
the bus daemon's reply, at most ``OWNER_TIMEOUT_MS``; with a record directory, the
start asks the bus daemon its id and the server's unique name the same way; and
``withdraw_all`` on quit waits for its calls.

An alert that is shown again replaces its notification (the server's id is kept per
alert and sent back as replaces_id) instead of piling up a new one. A second
``show()`` while the first Notify is still unanswered is held and sent when the
answer (and so the id) arrives; only the latest one is kept. A notice that stands
for several alerts (``show_notice``: grouped, flapping, the budget's summary) is
kept by its own id the same way. ``update_notice`` words a notice on show anew, in
place and without sound (a flapping critical's count); it never brings back one the
user closed or that was withdrawn.

On quit, ``withdraw_all`` closes every notification this console has on show
(CloseNotification), waiting for the server to have the calls. The spec offers no
way to find notifications a console left behind when it could not quit cleanly;
given a record directory, each console keeps its ids on disk and a later start on
the same bus closes what ended consoles left with the same server
(console/notify/leftovers.py).

The spec: https://specifications.freedesktop.org/notification-spec/latest/
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from PySide6.QtCore import SLOT, QObject, Signal, Slot
from PySide6.QtDBus import (
    QDBusConnection,
    QDBusError,
    QDBusMessage,
    QDBusPendingCall,
    QDBusPendingCallWatcher,
    QDBusServiceWatcher,
)

from console.fleet.alert_rows import AlertRow
from console.fleet.notify_policy import Notice
from console.notify import dbus_types, text
from console.notify.leftovers import NotificationRecord
from gpufleet.v1.alert_severity import Severity

log = logging.getLogger(__name__)

SERVICE = "org.freedesktop.Notifications"
PATH = "/org/freedesktop/Notifications"
INTERFACE = SERVICE
BUS_SERVICE = "org.freedesktop.DBus"
BUS_PATH = "/org/freedesktop/DBus"
APP_NAME = "GPU Fleet Console"
DESKTOP_ENTRY = "gpufleet-console"
CATEGORY = "device.error"
DEFAULT_ACTION = "default"
ACTIONS = (DEFAULT_ACTION, "Open GPU")  # key, label pairs
CRITICAL_SOUND = "dialog-error"
NEVER_EXPIRE, SERVER_DEFAULT_EXPIRY = 0, -1
URGENCY = {Severity.INFO: 0, Severity.WARNING: 1, Severity.CRITICAL: 2}  # low, normal, critical
ICONS = {
    Severity.INFO: "dialog-information",
    Severity.WARNING: "dialog-warning",
    Severity.CRITICAL: "dialog-error",
}
CALL_TIMEOUT_MS = 5000  # bounds how long an unanswered Notify holds the next update back
OWNER_TIMEOUT_MS = 250  # the bus daemon answers in microseconds; this bounds pathology
QUIT_TIMEOUT_MS = 1000  # each call on quit: the server answers in milliseconds

AlertUid = tuple[str, str]  # an alert's, or a notice's (node, "notice-N")
# What a notification says: severity, headline, body; and whether it may sound.
_Message = tuple[Severity, str, str, bool]
# What to do once the Notify in flight for an alert is answered: show this, withdraw, nothing.
_Next = _Message | Literal["withdraw"] | None


class DesktopNotifier(QObject):
    """Shows, replaces and withdraws alert notifications; says when one was clicked."""

    activated = Signal(str, str)  # (target, alert id): the user clicked the notification
    available_changed = Signal(bool)

    def __init__(
        self,
        bus: QDBusConnection | None = None,
        parent: QObject | None = None,
        record: Path | None = None,
    ) -> None:
        """`record`: the directory where consoles keep what they have on show (none: no
        record, and nothing an earlier console left is closed)."""
        super().__init__(parent)
        self.setObjectName("desktop-notifier")
        self.muted = False  # no sound hint (and suppress-sound) while True
        self._bus = bus if bus is not None else QDBusConnection.sessionBus()
        self._ids: dict[AlertUid, int] = {}  # alert -> the server's notification id
        self._alerts: dict[int, AlertUid] = {}
        self._in_flight: dict[AlertUid, _Next] = {}  # alerts whose Notify is unanswered
        self._notify_calls: dict[AlertUid, QDBusPendingCall] = {}  # those Notify calls
        self._servers: dict[int, str] = {}  # notification id -> the server's unique name
        self._record = NotificationRecord(record) if record is not None else None
        self._bus_id = ""
        self._server_name = ""  # the server's unique name (":1.7"), where a record needs it
        self._quitting = False
        self._has_owner = False
        self._activatable = False
        self._queries: dict[str, QDBusPendingCall] = {}  # start-up questions to the bus
        self._last_error = ""
        self._types_ok = dbus_types.supported()
        if not self._types_ok:
            log.warning("this PySide6 cannot marshal D-Bus byte/uint32: no desktop notifications")
        if self._bus.isConnected():
            self._watch_server()

    # -- public --------------------------------------------------------------

    @property
    def available(self) -> bool:
        """The bus is there and a notification server owns (or can be started for) the name."""
        if not (self._bus.isConnected() and self._types_ok):
            return False
        for member, call in list(self._queries.items()):
            call.waitForFinished()  # bounded by OWNER_TIMEOUT_MS
            self._take_query(member)
        return self._has_owner or self._activatable

    def show(self, alert: AlertRow, node_name: str) -> None:
        """Show `alert`, replacing the notification shown for it before, if any."""
        message = (alert.severity, text.headline(alert, node_name), text.body(alert), True)
        self._show(alert.uid, message)

    def show_notice(self, notice: Notice) -> None:
        """Show a notice of several alerts (or none), in its own words."""
        self._show(notice.uid, (notice.severity, notice.headline, notice.body, True))

    def update_notice(self, notice: Notice) -> None:
        """New words for a notice still on show: replaced in place, silently; else nothing."""
        on_show = notice.uid in self._ids or notice.uid in self._in_flight
        if on_show and self._in_flight.get(notice.uid) != "withdraw":
            self._show(notice.uid, (notice.severity, notice.headline, notice.body, False))

    def withdraw(self, alert: AlertRow) -> None:
        """Close the notification of a cleared or acknowledged alert, if we showed one."""
        self._withdraw(alert.uid)

    def withdraw_notice(self, notice: Notice) -> None:
        self._withdraw(notice.uid)

    def withdraw_all(self) -> int:
        """On quit: close every notification on show, and wait (each call at most
        QUIT_TIMEOUT_MS) until the server has them. Returns how many were closed."""
        self._quitting = True  # answers still to come are not remembered again
        for uid, call in list(self._notify_calls.items()):
            call.waitForFinished()
            if not call.isError():
                self._remember(uid, int(call.reply().arguments()[0]))
        self._in_flight.clear()
        self._notify_calls.clear()
        closes = [self._close_call(self._forget(uid)) for uid in list(self._ids)]
        for call in closes:
            call.waitForFinished()
            self._succeeded("CloseNotification", call)
        if self._record is not None:
            self._record.remove()
        return len(closes)

    def notification_id(self, alert: AlertRow | Notice) -> int | None:
        """The server's id of the notification showing `alert` (or a notice), if one is shown."""
        return self._ids.get(alert.uid)

    # -- sending -------------------------------------------------------------

    def _show(self, uid: AlertUid, message: _Message) -> None:
        if not (self._bus.isConnected() and self._types_ok) or self._quitting:
            return
        if uid in self._in_flight:
            self._in_flight[uid] = message
            return
        self._send_notify(uid, message)

    def _withdraw(self, uid: AlertUid) -> None:
        if uid in self._in_flight:
            self._in_flight[uid] = "withdraw"
        else:
            self._close(uid)

    def _send_notify(self, uid: AlertUid, message: _Message) -> None:
        call = QDBusMessage.createMethodCall(SERVICE, PATH, INTERFACE, "Notify")
        call.setArguments(self._notify_arguments(uid, message))
        self._in_flight[uid] = None
        reply = self._notify_calls[uid] = self._bus.asyncCall(call, CALL_TIMEOUT_MS)
        self._watch(reply, functools.partial(self._on_notify_finished, uid))

    def _notify_arguments(self, uid: AlertUid, message: _Message) -> list[Any]:
        severity, headline, body, sound = message
        return [
            APP_NAME,
            dbus_types.uint32(self._ids.get(uid, 0)),  # replaces_id
            ICONS.get(severity, ""),
            headline,
            body,
            list(ACTIONS),
            self._hints(severity, sound),
            NEVER_EXPIRE if severity is Severity.CRITICAL else SERVER_DEFAULT_EXPIRY,
        ]

    def _hints(self, severity: Severity, sound: bool = True) -> dict[str, Any]:
        hints: dict[str, Any] = {
            "urgency": dbus_types.byte(URGENCY.get(severity, 1)),
            "category": CATEGORY,
            "desktop-entry": DESKTOP_ENTRY,
        }
        if self.muted or not sound:
            hints["suppress-sound"] = True
        elif severity is Severity.CRITICAL:
            hints["sound-name"] = CRITICAL_SOUND
        return hints

    def _close(self, uid: AlertUid) -> None:
        notification_id = self._forget(uid)
        if notification_id is None:
            return
        self._watch(self._close_call(notification_id), self._on_close_finished)

    def _close_call(self, notification_id: int | None) -> QDBusPendingCall:
        message = QDBusMessage.createMethodCall(SERVICE, PATH, INTERFACE, "CloseNotification")
        message.setArguments([dbus_types.uint32(notification_id or 0)])
        timeout = QUIT_TIMEOUT_MS if self._quitting else CALL_TIMEOUT_MS
        return self._bus.asyncCall(message, timeout)

    def _watch(self, call: QDBusPendingCall, handler: Callable[[QDBusPendingCall], None]) -> None:
        watcher = QDBusPendingCallWatcher(call, self)
        watcher.setObjectName("desktop-notifier-call")
        watcher.finished.connect(lambda finished: self._on_call_finished(handler, finished))

    def _on_call_finished(
        self, handler: Callable[[QDBusPendingCall], None], watcher: QDBusPendingCallWatcher
    ) -> None:
        watcher.deleteLater()
        handler(watcher)

    def _on_notify_finished(self, uid: AlertUid, call: QDBusPendingCall) -> None:
        if self._quitting:
            return  # withdraw_all has taken care of it
        self._notify_calls.pop(uid, None)
        queued = self._in_flight.pop(uid, None)
        if self._succeeded("Notify", call):
            self._remember(uid, int(call.reply().arguments()[0]))
        if queued == "withdraw":
            self._close(uid)
        elif isinstance(queued, tuple):
            self._send_notify(uid, queued)

    def _on_close_finished(self, call: QDBusPendingCall) -> None:
        self._succeeded("CloseNotification", call)

    def _succeeded(self, member: str, call: QDBusPendingCall) -> bool:
        if not call.isError():
            self._last_error = ""
            return True
        error: QDBusError = call.error()
        # Log a failure once, not once per alert, until a call succeeds again.
        level = logging.DEBUG if error.name() == self._last_error else logging.WARNING
        log.log(level, "desktop notification %s failed: %s", member, error.message())
        self._last_error = error.name()
        return False

    # -- ids -----------------------------------------------------------------

    def _remember(self, uid: AlertUid, notification_id: int) -> None:
        self._forget(uid)
        self._ids[uid] = notification_id
        self._alerts[notification_id] = uid
        self._servers[notification_id] = self._server_name
        self._write_record()

    def _forget(self, uid: AlertUid) -> int | None:
        notification_id = self._ids.pop(uid, None)
        if notification_id is not None:
            self._alerts.pop(notification_id, None)
            self._servers.pop(notification_id, None)
            self._write_record()
        return notification_id

    def _write_record(self) -> None:
        if self._record is not None and not self._quitting:
            self._record.write(self._bus_id, sorted((s, n) for n, s in self._servers.items()))

    # -- what an earlier console left -----------------------------------------

    def _close_leftovers(self) -> None:
        """Once the bus's id and the server's unique name are known: close what consoles
        that ended without withdrawing left with this same server. Asked without
        blocking, as every other question to the bus: the GUI thread never waits on it."""
        if self._record is not None:
            self._ask_bus_then("GetId", (), self._on_bus_id)

    def _on_bus_id(self, bus_id: str | None) -> None:
        if bus_id is None:
            return
        self._bus_id = bus_id
        self._write_record()  # what was shown before the answer, now with its bus
        self._ask_bus_then("GetNameOwner", (SERVICE,), self._on_leftovers_server)

    def _on_leftovers_server(self, owner: str | None) -> None:
        if self._record is None or self._quitting:
            return
        if not owner:
            return  # no server now, nothing of it to close
        self._server_name = self._server_name or owner
        # Shown before the server's name was known: shown to this one. Recorded with it,
        # so that a start after this console is killed can close them.
        for notification_id, server in list(self._servers.items()):
            if not server:
                self._servers[notification_id] = owner
        self._write_record()
        left = self._record.leftovers(self._bus_id, owner)
        for notification_id in left:
            self._watch(self._close_call(notification_id), self._on_close_finished)
        if left:
            log.info("closed %d notification(s) an earlier console left on the desktop", len(left))

    def _ask_bus_then(
        self, member: str, args: tuple[Any, ...], then: Callable[[str | None], None]
    ) -> None:
        """A question to the bus daemon, answered later to `then` (None: no answer)."""
        message = QDBusMessage.createMethodCall(BUS_SERVICE, BUS_PATH, BUS_SERVICE, member)
        message.setArguments(list(args))

        def answered(call: QDBusPendingCall) -> None:
            reply = call.reply()
            ok = reply.type() == QDBusMessage.MessageType.ReplyMessage and reply.arguments()
            then(str(reply.arguments()[0]) if ok else None)

        self._watch(self._bus.asyncCall(message, OWNER_TIMEOUT_MS), answered)

    # -- the server ----------------------------------------------------------

    def _watch_server(self) -> None:
        watcher = QDBusServiceWatcher(
            SERVICE, self._bus, QDBusServiceWatcher.WatchModeFlag.WatchForOwnerChange, self
        )
        watcher.setObjectName("desktop-notifier-server-watcher")
        watcher.serviceOwnerChanged.connect(self._on_server_owner_changed)
        # Any sender (""): a named one would make Qt ask the bus for its owner, blocking.
        # The signature makes Qt drop a malformed signal before it reaches us.
        for signal, signature, slot in (
            ("ActionInvoked", "us", "_on_server_action_invoked(QDBusMessage)"),
            ("NotificationClosed", "uu", "_on_server_notification_closed(QDBusMessage)"),
        ):
            # PySide6 6.10 takes the slot as str, whatever its stub says.
            slot_name: Any = SLOT(slot)
            if not self._bus.connect("", PATH, INTERFACE, signal, signature, self, slot_name):
                log.warning("cannot listen to %s.%s: %s", INTERFACE, signal, self._bus.lastError())
        self._ask_bus("NameHasOwner", SERVICE)
        self._ask_bus("ListActivatableNames")
        self._close_leftovers()

    def _ask_bus(self, member: str, *args: Any) -> None:
        message = QDBusMessage.createMethodCall(BUS_SERVICE, BUS_PATH, BUS_SERVICE, member)
        message.setArguments(list(args))
        self._queries[member] = self._bus.asyncCall(message, OWNER_TIMEOUT_MS)
        self._watch(self._queries[member], lambda _call: self._take_query(member))

    def _take_query(self, member: str) -> None:
        """Apply a start-up answer once, whether it came by watcher or `available` waited."""
        call = self._queries.pop(member, None)
        if call is None or not self._succeeded(member, call):
            return
        answer = call.reply().arguments()[0]
        if member == "NameHasOwner":
            self._set_server(has_owner=bool(answer), activatable=self._activatable)
        else:
            self._set_server(has_owner=self._has_owner, activatable=SERVICE in answer)

    def _set_server(self, has_owner: bool, activatable: bool) -> None:
        before = self._has_owner or self._activatable
        self._has_owner, self._activatable = has_owner, activatable
        if before != (has_owner or activatable):
            self.available_changed.emit(has_owner or activatable)

    @Slot(str, str, str)
    def _on_server_owner_changed(self, _name: str, _old_owner: str, new_owner: str) -> None:
        self._queries.pop("NameHasOwner", None)  # this news is newer than that answer
        self._server_name = new_owner
        if not new_owner:  # the server went away, and its notifications with it
            self._ids.clear()
            self._alerts.clear()
            self._servers.clear()
            self._write_record()
        self._set_server(has_owner=bool(new_owner), activatable=self._activatable)

    @Slot(QDBusMessage)
    def _on_server_action_invoked(self, message: QDBusMessage) -> None:
        notification_id, action_key = message.arguments()
        uid = self._alerts.get(int(notification_id))
        if uid is not None and action_key == DEFAULT_ACTION:
            self.activated.emit(*uid)

    @Slot(QDBusMessage)
    def _on_server_notification_closed(self, message: QDBusMessage) -> None:
        uid = self._alerts.get(int(message.arguments()[0]))
        if uid is not None:
            self._forget(uid)
