"""Desktop notifications over a real, private D-Bus, to a notification server in its own process.

The server double (notification_server.py, on dbus-next) records every call with its
D-Bus types and, like GNOME Shell, KDE, dunst or mako, refuses a Notify whose
signature is not the spec's ``susssasa{sv}i``. So these tests prove what goes over the
wire, not what Python meant to send.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtDBus import QDBusConnection
from PySide6.QtWidgets import QSystemTrayIcon

from console.fleet.alert_rows import AlertRow
from console.fleet.notify_policy import Notice, NoticeKind
from console.main_window import MainWindow
from console.notify import text
from console.notify.desktop import DesktopNotifier
from console.notify.tray import TrayNotifier
from console.session import ConsoleSession
from gpufleet.v1.alert_severity import Severity
from tests.console.desktop_bus import (
    NOT_TESTED,
    dunst_count,
    dunst_on,
    private_session_bus,
    skip_unless_dunst_can_run,
)
from tests.console.xserver import read_line, stop, xvfb

BUS_NAME = "gpufleet-test-bus"
SERVER_SCRIPT = Path(__file__).with_name("notification_server.py")


@pytest.fixture
def private_bus(tmp_path: Path) -> Iterator[str]:
    """A dbus-daemon of this test's own; yields its address."""
    daemon = shutil.which("dbus-daemon")
    if daemon is None:
        what, fix = "dbus-daemon", "the project's test command installs it"
        pytest.skip(NOT_TESTED.format(what=what, fix=fix))
    with private_session_bus(tmp_path, daemon) as address:
        yield address


@pytest.fixture
def bus(private_bus: str) -> Iterator[QDBusConnection]:
    connection = QDBusConnection.connectToBus(private_bus, BUS_NAME)
    assert connection.isConnected(), connection.lastError().message()
    yield connection
    QDBusConnection.disconnectFromBus(BUS_NAME)


@dataclass
class ServerDouble:
    process: subprocess.Popen[str]
    log: Path

    def calls(self, member: str) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        lines = self.log.read_text(encoding="utf-8").splitlines()
        return [call for call in map(json.loads, lines) if call["member"] == member]

    def send(self, command: str) -> None:
        """``action ID KEY`` or ``close ID REASON``: the server emits that signal."""
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()


@pytest.fixture
def start_server(private_bus: str, tmp_path: Path) -> Iterator[Callable[[], ServerDouble]]:
    if importlib.util.find_spec("dbus_next") is None:
        what, fix = "dbus-next", "install the project's test extra (pip install -e '.[test]')"
        pytest.skip(NOT_TESTED.format(what=what, fix=fix))
    servers: list[ServerDouble] = []

    def start() -> ServerDouble:
        log = tmp_path / f"calls-{len(servers)}.jsonl"
        process = subprocess.Popen(
            [sys.executable, str(SERVER_SCRIPT), private_bus, str(log)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        servers.append(ServerDouble(process, log))
        assert read_line(process, 10.0, "the notification server") == "ready"
        return servers[-1]

    yield start
    for server in servers:
        stop(server.process)


@pytest.fixture
def server(start_server: Callable[[], ServerDouble]) -> ServerDouble:
    return start_server()


@pytest.fixture
def notifier(qtbot, bus: QDBusConnection, server: ServerDouble) -> Iterator[DesktopNotifier]:
    desktop = DesktopNotifier(bus)
    assert desktop.available
    yield desktop
    desktop.deleteLater()


def make_alert(severity: Severity = Severity.CRITICAL, **changes: Any) -> AlertRow:
    alert = AlertRow(
        target="10.0.0.2:50051",
        id="a-17",
        key="gpu_temp/3",
        rule="gpu_temp",
        severity=severity,
        firing=True,
        gpu_index=3,
        gpu_uuid="GPU-3",
        pid=None,
        value=86.2,
        unit="°C",
        summary="GPU 3 temperature 86 °C (critical at 85 °C)",
        started_unix_ms=int(time.time() * 1000),
        updated_unix_ms=int(time.time() * 1000),
        cleared_unix_ms=None,
        occurrences=1,
        acknowledged_by="",
        acknowledged_unix_ms=None,
        silenced_until_unix_ms=None,
        silenced_by="",
        silence_reason="",
    )
    return replace(alert, **changes)


def shown(qtbot, notifier: DesktopNotifier, alert: AlertRow) -> int:
    """Show `alert` and wait for the server's id for it."""
    notifier.show(alert, "gpu-node-02")
    qtbot.waitUntil(lambda: notifier.notification_id(alert) is not None, timeout=3000)
    notification_id = notifier.notification_id(alert)
    assert notification_id is not None
    return notification_id


def notify_arguments(call: dict[str, Any]) -> dict[str, Any]:
    assert call["signature"] == "susssasa{sv}i"  # the spec's, exactly
    names = ("app_name", "replaces_id", "app_icon", "summary", "body", "actions", "hints",
             "expire_timeout")  # fmt: skip
    return dict(zip(names, call["args"], strict=True))


# -- D-Bus: what the server receives ---------------------------------------


def test_critical_alert_is_urgent_sticky_and_loud(qtbot, notifier, server) -> None:
    alert = make_alert(Severity.CRITICAL)
    shown(qtbot, notifier, alert)
    notify = notify_arguments(server.calls("Notify")[0])
    assert notify["app_name"] == "GPU Fleet Console"
    assert notify["replaces_id"] == 0
    assert notify["summary"] == "CRITICAL · gpu-node-02 GPU 3: GPU temperature 86 °C"
    assert notify["body"].startswith(alert.summary + "\nsince ")
    assert notify["actions"] == ["default", "Open GPU"]
    assert notify["hints"] == {
        "urgency": {"type": "y", "value": 2},
        "category": {"type": "s", "value": "device.error"},
        "desktop-entry": {"type": "s", "value": "gpufleet-console"},
        "sound-name": {"type": "s", "value": "dialog-error"},
    }
    assert notify["expire_timeout"] == 0  # never expires


@pytest.mark.parametrize(
    ("severity", "urgency"), [(Severity.WARNING, 1), (Severity.INFO, 0)], ids=["warning", "info"]
)
def test_lesser_alerts_are_quiet_and_expire(qtbot, notifier, server, severity, urgency) -> None:
    shown(qtbot, notifier, make_alert(severity))
    notify = notify_arguments(server.calls("Notify")[0])
    assert notify["summary"].startswith(f"{severity.name} · gpu-node-02 GPU 3: ")
    assert notify["hints"]["urgency"] == {"type": "y", "value": urgency}
    assert "sound-name" not in notify["hints"]
    assert notify["expire_timeout"] == -1  # the server's default


def test_muted_critical_alert_has_no_sound(qtbot, notifier, server) -> None:
    notifier.muted = True
    shown(qtbot, notifier, make_alert(Severity.CRITICAL))
    hints = notify_arguments(server.calls("Notify")[0])["hints"]
    assert "sound-name" not in hints
    assert hints["suppress-sound"] == {"type": "b", "value": True}
    assert hints["urgency"] == {"type": "y", "value": 2}


def test_an_update_replaces_the_notification(qtbot, notifier, server) -> None:
    first_id = shown(qtbot, notifier, make_alert(value=86.0))
    notifier.show(make_alert(value=91.0), "gpu-node-02")
    qtbot.waitUntil(lambda: len(server.calls("Notify")) == 2, timeout=3000)
    second = notify_arguments(server.calls("Notify")[1])
    assert second["replaces_id"] == first_id
    assert second["summary"].endswith("GPU temperature 91 °C")
    assert notifier.notification_id(make_alert()) == first_id


def test_updates_before_the_reply_are_held_and_the_latest_replaces(qtbot, notifier, server) -> None:
    for value in (86.0, 88.0, 90.0):  # all before the server has answered the first
        notifier.show(make_alert(value=value), "gpu-node-02")
    qtbot.waitUntil(lambda: len(server.calls("Notify")) == 2, timeout=3000)
    first, latest = (notify_arguments(call) for call in server.calls("Notify"))
    assert first["summary"].endswith("86 °C") and first["replaces_id"] == 0
    assert latest["summary"].endswith("90 °C") and latest["replaces_id"] == 1
    notifier.withdraw(make_alert())  # goes out after anything still held
    qtbot.waitUntil(lambda: len(server.calls("CloseNotification")) == 1, timeout=3000)
    assert len(server.calls("Notify")) == 2  # 88 °C was never sent


def test_a_notice_updated_in_place_is_silent_and_never_brought_back(
    qtbot, notifier, server
) -> None:
    """A flapping critical's count: new words for the notice on show, replaced without sound;
    once withdrawn, an update shows nothing."""
    words = ("CRITICAL · gpu-node-02 GPU 1: GPU lost flapping, {} times in 10 min", "lost again")
    notice = Notice(("10.0.0.2:50051", "notice-1"), NoticeKind.FLAPPING, Severity.CRITICAL,
                    words[0].format(2), words[1], (make_alert(),))  # fmt: skip
    notifier.update_notice(notice)  # not on show: nothing
    notifier.show_notice(notice)
    qtbot.waitUntil(lambda: notifier.notification_id(notice) is not None, timeout=3000)
    notification_id = notifier.notification_id(notice)
    notifier.update_notice(replace(notice, headline=words[0].format(3)))
    qtbot.waitUntil(lambda: len(server.calls("Notify")) == 2, timeout=3000)
    first, update = (notify_arguments(call) for call in server.calls("Notify"))
    assert first["replaces_id"] == 0 and "sound-name" in first["hints"]
    assert update["replaces_id"] == notification_id
    assert update["summary"] == words[0].format(3)
    assert "sound-name" not in update["hints"]
    assert update["hints"]["suppress-sound"] == {"type": "b", "value": True}
    assert update["hints"]["urgency"] == {"type": "y", "value": 2}
    notifier.withdraw_notice(notice)
    notifier.update_notice(replace(notice, headline=words[0].format(4)))
    qtbot.waitUntil(lambda: len(server.calls("CloseNotification")) == 1, timeout=3000)
    assert len(server.calls("Notify")) == 2


def test_withdraw_before_the_reply_closes_once_the_id_is_known(qtbot, notifier, server) -> None:
    notifier.show(make_alert(), "gpu-node-02")
    notifier.withdraw(make_alert())
    qtbot.waitUntil(lambda: len(server.calls("CloseNotification")) == 1, timeout=3000)
    assert server.calls("CloseNotification")[0]["args"] == [1]
    assert notifier.notification_id(make_alert()) is None


def test_withdraw_closes_what_was_shown(qtbot, notifier, server) -> None:
    alert = make_alert()
    notification_id = shown(qtbot, notifier, alert)
    notifier.withdraw(make_alert(id="never-shown"))  # nothing to close: no call
    notifier.withdraw(alert)
    qtbot.waitUntil(lambda: len(server.calls("CloseNotification")) == 1, timeout=3000)
    close = server.calls("CloseNotification")[0]
    assert close["signature"] == "u"
    assert close["args"] == [notification_id]
    assert notifier.notification_id(alert) is None
    shown(qtbot, notifier, alert)  # shown again after a withdraw: a new notification
    assert notify_arguments(server.calls("Notify")[-1])["replaces_id"] == 0


def test_a_click_on_the_notification_opens_its_alert(qtbot, notifier, server) -> None:
    alert = make_alert()
    notification_id = shown(qtbot, notifier, alert)
    opened: list[tuple[str, str]] = []
    notifier.activated.connect(lambda target, alert_id: opened.append((target, alert_id)))
    with qtbot.waitSignal(notifier.activated, timeout=3000) as clicked:
        server.send("action 999 default")  # another application's notification
        server.send(f"action {notification_id} default")
    assert clicked.args == [alert.target, alert.id]
    assert opened == [(alert.target, alert.id)]  # signals arrive in order: 999 was ignored


def test_a_notification_the_server_closed_is_not_replaced(qtbot, notifier, server) -> None:
    alert = make_alert()
    notification_id = shown(qtbot, notifier, alert)
    server.send(f"close {notification_id} 2")  # 2: dismissed by the user
    qtbot.waitUntil(lambda: notifier.notification_id(alert) is None, timeout=3000)
    shown(qtbot, notifier, alert)
    assert notify_arguments(server.calls("Notify")[-1])["replaces_id"] == 0


def test_no_server_on_the_bus_then_one_starts(qtbot, bus, start_server) -> None:
    desktop = DesktopNotifier(bus)
    assert not desktop.available
    alert = make_alert()
    desktop.show(alert, "gpu-node-02")  # refused by the bus: logged, not raised
    desktop.withdraw(alert)
    with qtbot.waitSignal(desktop.available_changed, timeout=5000) as changed:
        server = start_server()
    assert changed.args == [True] and desktop.available
    shown(qtbot, desktop, alert)
    assert notify_arguments(server.calls("Notify")[0])["replaces_id"] == 0
    desktop.deleteLater()


def test_without_a_bus_nothing_is_available_and_nothing_raises(qtbot) -> None:
    desktop = DesktopNotifier(QDBusConnection("gpufleet-no-such-bus"))
    assert not desktop.available
    desktop.show(make_alert(), "gpu-node-02")
    desktop.withdraw(make_alert())
    assert desktop.notification_id(make_alert()) is None


# -- the words --------------------------------------------------------------


def test_headline_for_a_node_alert_and_a_value_without_meaning() -> None:
    lost = make_alert(rule="backend_degraded", gpu_index=None, value=None, unit="")
    assert text.headline(lost, "gpu-node-01") == "CRITICAL · gpu-node-01: GPU backend degraded"
    throttled = make_alert(Severity.WARNING, rule="throttle", value=12.0, unit="mask")
    assert text.headline(throttled, "n") == "WARNING · n GPU 3: throttling"
    unknown = make_alert(Severity.INFO, rule="fan_stuck", value=0.0, unit="%")
    assert text.headline(unknown, "n") == "INFO · n GPU 3: fan stuck 0 %"


# -- the system tray ----------------------------------------------------------


def test_tray_without_a_system_tray_is_unavailable_and_quiet(qtbot) -> None:
    tray = TrayNotifier()  # the offscreen platform has no tray
    assert not tray.available
    tray.show(make_alert(), "gpu-node-02")


def test_tray_message_click_opens_the_last_alert(qtbot) -> None:
    icon = QSystemTrayIcon()
    tray = TrayNotifier(icon)
    tray.show(make_alert(id="a-1"), "gpu-node-01")
    tray.show(make_alert(id="a-2"), "gpu-node-02")
    with qtbot.waitSignal(tray.activated, timeout=1000) as clicked:
        icon.messageClicked.emit()
    assert clicked.args == ["10.0.0.2:50051", "a-2"]


# -- a real notification daemon -------------------------------------------------


def test_dunst_shows_replaces_and_closes_our_notifications(qtbot, caplog, private_bus, bus) -> None:
    skip_unless_dunst_can_run(("dunst", "Xvfb"), "dunst xvfb")
    with xvfb(quiet=True) as display, dunst_on(private_bus, display):
        desktop = DesktopNotifier(bus)
        qtbot.waitUntil(lambda: desktop.available, timeout=5000)
        alert = make_alert()
        assert shown(qtbot, desktop, alert) > 0  # an id back: dunst took our signature
        qtbot.waitUntil(lambda: dunst_count(bus) == 1, timeout=3000)
        desktop.show(make_alert(value=92.0), "gpu-node-02")  # replaces: still one
        desktop.withdraw(alert)  # held until dunst has answered the replacement
        qtbot.waitUntil(lambda: dunst_count(bus) == 0, timeout=3000)
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
        desktop.deleteLater()


# -- quitting, and what an earlier console left (issue #33) ------------------------

CONSOLE_SCRIPT = """
import sys, time
from pathlib import Path
from PySide6.QtCore import QCoreApplication
from PySide6.QtDBus import QDBusConnection
from console.notify.desktop import DesktopNotifier
from tests.console.test_desktop_notifier import make_alert

app = QCoreApplication([])
bus = QDBusConnection.connectToBus(sys.argv[1], "console")
desktop = DesktopNotifier(bus, record=Path(sys.argv[2]))
alert = make_alert(id=sys.argv[3], summary=sys.argv[3])
desktop.show(alert, "gpu-node-02")
while desktop.notification_id(alert) is None:
    app.processEvents()
    time.sleep(0.01)
print("shown", flush=True)
while True:
    app.processEvents()
    time.sleep(0.05)
"""


def start_console(address: str, record: Path, alert_id: str) -> subprocess.Popen[str]:
    """Another console process with a critical notification on show."""
    process = subprocess.Popen([sys.executable, "-c", CONSOLE_SCRIPT, address, str(record),
                                alert_id], stdout=subprocess.PIPE, text=True,
                               cwd=Path(__file__).parents[2])  # fmt: skip
    assert read_line(process, 20.0, "the other console") == "shown"
    return process


def test_quitting_withdraws_every_notification_the_console_raised(
    qtbot, private_bus, bus, tmp_path: Path
) -> None:
    """The previous run's critical was still on the desktop after a restart: quitting now
    closes each one (CloseNotification) on dunst, and the record goes with them."""
    skip_unless_dunst_can_run(("dunst", "Xvfb"), "dunst xvfb")
    record = tmp_path / "notifications"
    with xvfb(quiet=True) as display, dunst_on(private_bus, display):
        desktop = DesktopNotifier(bus, record=record)
        qtbot.waitUntil(lambda: desktop.available, timeout=5000)
        for gpu in range(3):  # criticals: dunst keeps them until closed
            shown(qtbot, desktop, make_alert(id=f"a-{gpu}", gpu_index=gpu))
        desktop.show(make_alert(id="a-3", gpu_index=3), "gpu-node-02")  # unanswered: closed too
        qtbot.waitUntil(lambda: dunst_count(bus) >= 3, timeout=3000)
        assert len(json.loads((record / f"{os.getpid()}.json").read_text())["notifications"]) >= 3
        assert desktop.withdraw_all() == 4
        assert dunst_count(bus) == 0  # at once: withdraw_all waited for dunst
        assert list(record.glob("*.json")) == []
        desktop.show(make_alert(id="a-9", gpu_index=9), "gpu-node-02")  # after quit: nothing
        qtbot.wait(200)
        assert dunst_count(bus) == 0
        desktop.deleteLater()


def test_a_start_closes_what_a_killed_console_left_and_not_a_running_ones(
    qtbot, private_bus, bus, tmp_path: Path
) -> None:
    """A console killed (no quit) left its critical; the next start closes it, where the
    same dunst still runs. Another console still running keeps its own."""
    skip_unless_dunst_can_run(("dunst", "Xvfb"), "dunst xvfb")
    record = tmp_path / "notifications"
    with xvfb(quiet=True) as display, dunst_on(private_bus, display):
        killed = start_console(private_bus, record, "killed")
        running = start_console(private_bus, record, "running")
        try:
            qtbot.waitUntil(lambda: dunst_count(bus) == 2, timeout=5000)
            killed.kill()  # SIGKILL: no chance to withdraw anything
            killed.wait(timeout=10)
            assert len(list(record.glob("*.json"))) == 2
            desktop = DesktopNotifier(bus, record=record)  # the next start
            qtbot.waitUntil(lambda: dunst_count(bus) == 1, timeout=3000)
            qtbot.wait(300)
            assert dunst_count(bus) == 1  # the running console's is left alone
            assert [p.stem for p in record.glob("*.json")] == [str(running.pid)]
            desktop.deleteLater()
        finally:
            for process in (killed, running):
                stop(process)


def test_a_restarted_server_is_not_asked_to_close_an_earlier_servers_ids(
    qtbot, private_bus, bus, tmp_path: Path
) -> None:
    """Ids count from 1 again in a new server: another program's notification may hold
    the number a dead console recorded. Those ids are dropped, never closed."""
    skip_unless_dunst_can_run(("dunst", "Xvfb"), "dunst xvfb")
    record = tmp_path / "notifications"
    with xvfb(quiet=True) as display:
        with dunst_on(private_bus, display):
            killed = start_console(private_bus, record, "killed")
            killed.kill()
            stop(killed)
        with dunst_on(private_bus, display):  # a new dunst: ids from 1 again
            other = DesktopNotifier(bus)  # another program's notification, id 1
            qtbot.waitUntil(lambda: other.available, timeout=5000)
            shown(qtbot, other, make_alert(id="someone-elses", summary="someone else's"))
            desktop = DesktopNotifier(bus, record=record)
            qtbot.wait(300)
            assert dunst_count(bus) == 1  # left alone
            assert list(record.glob("*.json")) == []  # the dead console's record is gone
            desktop.deleteLater()
            other.deleteLater()


def test_closing_the_window_withdraws_the_consoles_notifications(
    qtbot, private_bus, bus, tmp_path: Path
) -> None:
    """Quit (the window's close, as File > Quit does) takes the critical off dunst."""
    skip_unless_dunst_can_run(("dunst", "Xvfb"), "dunst xvfb")
    with xvfb(quiet=True) as display, dunst_on(private_bus, display):
        desktop = DesktopNotifier(bus, record=tmp_path / "notifications")
        window = MainWindow(ConsoleSession([]), sinks=[desktop])
        qtbot.addWidget(window)
        window.show()
        qtbot.waitUntil(lambda: desktop.available, timeout=5000)
        shown(qtbot, desktop, make_alert())
        qtbot.waitUntil(lambda: dunst_count(bus) == 1, timeout=3000)
        window.close()
        assert dunst_count(bus) == 0
        desktop.deleteLater()
