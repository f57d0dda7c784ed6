"""The desktop's notification side, of a test's (or a bench's) own: a private D-Bus
session bus, dunst showing notifications on it, and a sink that records what the
console asked to show. The one set-up the desktop, noise-control and silent-node
tests and bench/silent_node_notice.py share."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtDBus import QDBus, QDBusConnection, QDBusMessage, QDBusVariant

from console.fleet.alert_rows import AlertRow
from console.notify.desktop import PATH, SERVICE
from tests.console.xserver import read_line, stop

NOT_TESTED = "!!! {what} NOT INSTALLED: desktop notifications NOT TESTED; {fix} !!!"
# A session bus of our own: no service directories, so nothing is ever D-Bus-activated
# (an installed dunst would otherwise be started for org.freedesktop.Notifications).
BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:tmpdir={tmpdir}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"""
BUS_START_S = 5.0  # dbus-daemon prints its address within this
PROPERTIES = "org.freedesktop.DBus.Properties"
DUNST_INTERFACE = "org.dunstproject.cmd0"
# dunst runs the script for every notification it shows: when, and what it understood.
DUNSTRC = """[global]
    font = Monospace 8
[every_notification]
    script = {script}
"""
RECORD_SCRIPT = '#!/bin/sh\necho "$(date +%s.%N)|$DUNST_URGENCY|$DUNST_SUMMARY" >> {seen}\n'


def skip_unless_dunst_can_run(tools: tuple[str, ...], packages: str) -> None:
    """Skips the test loudly unless every one of `tools` is installed; `packages`: what
    ``apt-get install`` installs them with."""
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        what, fix = " and ".join(missing), f"apt-get install {packages}"
        pytest.skip(NOT_TESTED.format(what=what, fix=fix).replace("desktop", "dunst"))


@contextlib.contextmanager
def private_session_bus(workdir: Path, daemon: str = "dbus-daemon") -> Iterator[str]:
    """A dbus-daemon of our own, its configuration and socket in `workdir`; yields its
    address."""
    config = workdir / "bus.conf"
    config.write_text(BUS_CONFIG.format(tmpdir=workdir), encoding="utf-8")
    process = subprocess.Popen(
        [daemon, f"--config-file={config}", "--nofork", "--print-address=1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        yield read_line(process, BUS_START_S, "dbus-daemon")
    finally:
        stop(process)


@contextlib.contextmanager
def dunst_on(address: str, display: str, config: Path | None = None) -> Iterator[None]:
    """dunst serving notifications on the bus at `address`, showing them on `display`
    (`config`: its dunstrc, or the one it finds itself)."""
    env = {**os.environ, "DISPLAY": display, "DBUS_SESSION_BUS_ADDRESS": address}
    argv = ["dunst"] if config is None else ["dunst", "-config", str(config)]
    process = subprocess.Popen(argv, env=env, stderr=subprocess.DEVNULL, text=True)
    try:
        yield
    finally:
        stop(process)


@contextlib.contextmanager
def recording_dunst(workdir: Path, address: str, display: str) -> Iterator[Path]:
    """dunst as `dunst_on` starts it, with a rule that records each notification it shows;
    yields the file of records (read it with `shown_by_dunst`)."""
    seen, script = workdir / "dunst-seen.txt", workdir / "record.sh"
    script.write_text(RECORD_SCRIPT.format(seen=seen), encoding="utf-8")
    script.chmod(0o755)
    config = workdir / "dunstrc"
    config.write_text(DUNSTRC.format(script=script), encoding="utf-8")
    with dunst_on(address, display, config):
        yield seen


def shown_by_dunst(seen: Path) -> list[tuple[float, str, str]]:
    """(time, urgency, summary) of every notification dunst showed so far."""
    lines = seen.read_text(encoding="utf-8").splitlines() if seen.exists() else []
    records = (line.split("|", 2) for line in lines)
    return [(float(t), urgency, summary) for t, urgency, summary in records]


def dunst_count(bus: QDBusConnection) -> int:
    """How many notifications dunst shows or queues (what ``dunstctl count`` asks)."""
    counts = []
    for prop in ("displayedLength", "waitingLength"):
        message = QDBusMessage.createMethodCall(SERVICE, PATH, PROPERTIES, "Get")
        message.setArguments([DUNST_INTERFACE, prop])
        reply = bus.call(message, QDBus.CallMode.Block, 1000)
        assert reply.type() == QDBusMessage.MessageType.ReplyMessage, reply.errorMessage()
        value = reply.arguments()[0]
        counts.append(int(value.variant() if isinstance(value, QDBusVariant) else value))
    return sum(counts)


class RecordingSink:
    """Stands in for the desktop notification server: records what it was asked to show."""

    available = True

    def __init__(self) -> None:
        self.shown: list[tuple[AlertRow, str]] = []
        self.withdrawn: list[AlertRow] = []

    def show(self, alert: AlertRow, node_name: str) -> None:
        self.shown.append((alert, node_name))

    def withdraw(self, alert: AlertRow) -> None:
        self.withdrawn.append(alert)
