"""A freedesktop notification server for tests: a separate peer on a private D-Bus.

Run as ``python notification_server.py BUS_ADDRESS LOG_FILE``. It owns
``org.freedesktop.Notifications`` on that bus and answers the spec's methods
(Notify, CloseNotification, GetCapabilities, GetServerInformation, and
Introspect). Every call to the interface is appended to LOG_FILE as one JSON
line: the member, the message's D-Bus signature and the arguments, each variant
as ``{"type": SIG, "value": V}``, so a test sees the exact types that went over
the wire. Like a real server (GNOME Shell, dunst, mako), it refuses a call whose
signature differs from the spec's.

Commands on standard input make it emit the server's signals:
``action ID KEY`` (ActionInvoked) and ``close ID REASON`` (NotificationClosed).
It prints ``ready`` once it owns the name, and exits at the end of its input.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from typing import Any

from dbus_next import Message, MessageType, RequestNameReply, Variant
from dbus_next.aio import MessageBus

NAME = "org.freedesktop.Notifications"
PATH = "/org/freedesktop/Notifications"
INTROSPECTABLE = "org.freedesktop.DBus.Introspectable"
SIGNATURES = {
    "Notify": "susssasa{sv}i",
    "CloseNotification": "u",
    "GetCapabilities": "",
    "GetServerInformation": "",
}
INTROSPECTION = f"""<node>
 <interface name="{NAME}">
  <method name="Notify">
   <arg name="app_name" type="s" direction="in"/>
   <arg name="replaces_id" type="u" direction="in"/>
   <arg name="app_icon" type="s" direction="in"/>
   <arg name="summary" type="s" direction="in"/>
   <arg name="body" type="s" direction="in"/>
   <arg name="actions" type="as" direction="in"/>
   <arg name="hints" type="a{{sv}}" direction="in"/>
   <arg name="expire_timeout" type="i" direction="in"/>
   <arg name="id" type="u" direction="out"/>
  </method>
  <method name="CloseNotification"><arg name="id" type="u" direction="in"/></method>
  <method name="GetCapabilities"><arg name="caps" type="as" direction="out"/></method>
  <method name="GetServerInformation">
   <arg name="name" type="s" direction="out"/><arg name="vendor" type="s" direction="out"/>
   <arg name="version" type="s" direction="out"/><arg name="spec" type="s" direction="out"/>
  </method>
  <signal name="ActionInvoked"><arg type="u"/><arg type="s"/></signal>
  <signal name="NotificationClosed"><arg type="u"/><arg type="u"/></signal>
 </interface>
 <interface name="{INTROSPECTABLE}">
  <method name="Introspect"><arg type="s" direction="out"/></method>
 </interface>
</node>"""


def plain(value: Any) -> Any:
    """JSON-able form of a dbus-next value; a variant keeps its signature."""
    if isinstance(value, Variant):
        return {"type": value.signature, "value": plain(value.value)}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, bytes):
        return list(value)
    return value


class NotificationServer:
    """Answers the notification interface and logs every call to it."""

    def __init__(self, bus: MessageBus, log_path: str) -> None:
        self._bus = bus
        self._log_path = log_path
        self._last_id = 0

    def handle(self, msg: Message) -> Message | bool:
        if msg.message_type != MessageType.METHOD_CALL or msg.path != PATH:
            return False
        if msg.interface == INTROSPECTABLE and msg.member == "Introspect":
            return Message.new_method_return(msg, "s", [INTROSPECTION])
        if msg.interface != NAME:
            return False
        self._log(msg)
        if SIGNATURES.get(msg.member) != msg.signature:
            return Message.new_error(
                msg,
                "org.freedesktop.DBus.Error.InvalidArgs",
                f"{msg.member} wants ({SIGNATURES.get(msg.member)}), got ({msg.signature})",
            )
        return self._answer(msg)

    def emit(self, member: str, signature: str, body: list[Any]) -> None:
        self._bus.send(Message.new_signal(PATH, NAME, member, signature, body))

    def _answer(self, msg: Message) -> Message:
        if msg.member == "Notify":
            replaces_id = msg.body[1]
            if not replaces_id:
                self._last_id += 1
            return Message.new_method_return(msg, "u", [replaces_id or self._last_id])
        if msg.member == "CloseNotification":
            self.emit("NotificationClosed", "uu", [msg.body[0], 3])  # 3: closed by a call
            return Message.new_method_return(msg)
        if msg.member == "GetCapabilities":
            return Message.new_method_return(msg, "as", [["actions", "body", "sound"]])
        return Message.new_method_return(msg, "ssss", ["gpufleet-test", "gpufleet", "1", "1.2"])

    def _log(self, msg: Message) -> None:
        line = {"member": msg.member, "signature": msg.signature, "args": plain(msg.body)}
        with open(self._log_path, "a", encoding="utf-8") as log:
            log.write(json.dumps(line) + "\n")


def run_command(server: NotificationServer, line: str) -> None:
    words = line.split()
    if len(words) == 3 and words[0] == "action":
        server.emit("ActionInvoked", "us", [int(words[1]), words[2]])
    elif len(words) == 3 and words[0] == "close":
        server.emit("NotificationClosed", "uu", [int(words[1]), int(words[2])])
    elif words:
        print(f"unknown command: {line.strip()}", file=sys.stderr, flush=True)


async def serve(address: str, log_path: str) -> None:
    bus = await MessageBus(bus_address=address).connect()
    server = NotificationServer(bus, log_path)
    handler: Callable[[Message], Message | bool] = server.handle
    bus.add_message_handler(handler)
    if await bus.request_name(NAME) != RequestNameReply.PRIMARY_OWNER:
        raise SystemExit(f"could not own {NAME}")
    print("ready", flush=True)
    loop = asyncio.get_running_loop()
    while line := await loop.run_in_executor(None, sys.stdin.readline):
        run_command(server, line)
    bus.disconnect()


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1], sys.argv[2]))
