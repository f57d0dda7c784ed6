"""Running the console: the Qt application, the session and the main window."""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from console.connections.prometheus_range import PrometheusSource
from console.connections.security import LinkSecurity
from console.fleet.moment_link import utc_text
from console.fleet.notify_settings import NotifySettings
from console.main_window import MainWindow
from console.notify import leftovers
from console.notify.desktop import DesktopNotifier
from console.notify.tray import TrayNotifier
from console.qt.alert_notifier import NotificationSink
from console.qt.gui_thread_gc import collect_in_gui_thread
from console.qt.qt_logging import install_qt_log_handler
from console.session import ConsoleSession
from console.settings import SlurmProfile
from console.views.common.theme import DARK
from console.views.window.first_layout import fit_to_screen
from console.views.window.looks import apply_to_app
from console.views.window.window_looks import WindowLooks

# The profile's Slurm and where its token comes from (called off the GUI thread).
SlurmSource = tuple[SlurmProfile, Callable[[], str]]

log = logging.getLogger(__name__)


# A screenshot is taken once the live plots have this long to fill...
SCREENSHOT_SETTLE_S = 8.0
# ... and, for a moment (--at), once its answers are in: at most this much longer.
SETTLE_WAIT_S = 20.0


def has_display() -> bool:
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


# The offscreen platform's screen (a screenshot's, `--screenshot`): a common desktop's.
# Qt's own is 800x800, which cuts a window restored from a person's saved layout down
# to a picture too small for a report's grid.
OFFSCREEN_SCREEN = (1920, 1080)


# PySide hands the interpreter lock over on every call into Qt; coming back, the GUI
# thread waits for it while another Python thread runs (the network thread decoding a
# burst of answers). Beside a busy thread a call then costs 174 us at Python's default
# 5 ms switch interval, 38 us at 1 ms, 8 us at 0.2 ms (bench/gil_handover.py): a grid
# repaint makes about a thousand.
GIL_SWITCH_S = 0.0002


def qt_application(offscreen: bool = False) -> QApplication:
    if offscreen:
        os.environ["QT_QPA_PLATFORM"] = "offscreen"
    app = QApplication.instance() or _new_application(offscreen)
    assert isinstance(app, QApplication)
    app.setApplicationName("GPU Fleet Console")
    app.setOrganizationName("gpufleet")
    # Wayland matches the window to installer/desktop/gpufleet-console.desktop by this.
    app.setDesktopFileName("gpufleet-console")
    install_qt_log_handler()
    # The GUI thread waits for the interpreter lock at each return from Qt while the
    # network thread decodes (a replay move: 125 answers at once): see GIL_SWITCH_S.
    sys.setswitchinterval(GIL_SWITCH_S)
    # Cycles are collected between events in this thread, never by the network thread
    # (which would destroy Qt objects the GUI thread is using: console/qt/gui_thread_gc.py).
    collect_in_gui_thread()
    # Dark until a window's WindowLooks applies the chosen theme (console/views/window/looks.py).
    apply_to_app(DARK)
    return app


def _new_application(offscreen: bool) -> QApplication:
    if not offscreen:
        return QApplication(sys.argv[:1])
    width, height = OFFSCREEN_SCREEN
    screen = {"name": "offscreen", "x": 0, "y": 0, "width": width, "height": height,
              "logicalDpi": 96, "logicalBaseDpi": 96, "dpr": 1}  # fmt: skip
    # Read once, as the platform starts; a file of our own (mkstemp), gone right after.
    descriptor, config = tempfile.mkstemp(prefix="gpufleet-offscreen-", suffix=".json")
    try:
        with os.fdopen(descriptor, "w") as file:
            json.dump({"screens": [screen]}, file)
        os.environ["QT_QPA_PLATFORM"] = f"offscreen:configfile={config}"
        return QApplication(sys.argv[:1])
    finally:
        os.environ["QT_QPA_PLATFORM"] = "offscreen"  # what a child process inherits
        os.unlink(config)


def build_window(
    targets: Sequence[str],
    people: Sequence[str] = (),
    security: LinkSecurity | None = None,
    profile: str = "",
    notify: NotifySettings | None = None,
    theme: str = "auto",
    wall: bool = False,
    prometheus: PrometheusSource | None = None,
    slurm: SlurmSource | None = None,
) -> MainWindow:
    session = ConsoleSession(
        targets, people=people, security=security, profile=profile, prometheus=prometheus,
        slurm=slurm[0] if slurm else None, slurm_token=slurm[1] if slurm else None,
    )  # fmt: skip
    # Desktop notifications first; the tray only where no notification server runs.
    # Each keeps a record of what it shows: a later start closes what a dead one left.
    sinks: list[NotificationSink] = [DesktopNotifier(record=leftovers.default_directory()),
                                     TrayNotifier()]  # fmt: skip
    window = MainWindow(session, sinks=sinks, notify=notify)
    # Theme, wall mode, the View menu and the remembered layout (saved on close); with
    # none saved, the first start's layout for this screen. A child: find it by type.
    WindowLooks(window, profile, theme, wall, first_start=partial(fit_to_screen, window))
    session.start()
    return window


def run_console(
    build: Callable[[], MainWindow],
    screenshot: Path | None = None,
    settle_s: float = SCREENSHOT_SETTLE_S,
    on_ready: Callable[[MainWindow], None] | None = None,
    settled: Callable[[], bool] = lambda: True,
) -> int:
    """Show the window `build` makes (build_window, its settings bound) until closed; with
    `screenshot`, render offscreen, save once `settle_s` has passed and `settled()` holds
    (a moment opened with --at: its answers in; at most SETTLE_WAIT_S more), exit."""
    app = qt_application(offscreen=screenshot is not None)
    window = build()
    if on_ready is not None:
        on_ready(window)
    # Full collections walk only what the running console makes, not its start-up heap.
    collect_in_gui_thread().freeze_long_lived()
    if screenshot is not None:
        deadline = time.monotonic() + settle_s + SETTLE_WAIT_S

        def save_when_settled() -> None:
            if settled() or time.monotonic() > deadline:
                _save_and_quit(window, screenshot)
            else:  # a frame later: the moment's answers arrive through the frame pump
                QTimer.singleShot(100, save_when_settled)

        QTimer.singleShot(round(settle_s * 1000), save_when_settled)
    window.show()
    if screenshot is None:  # a person's first start: the guided tour (Help has it later)
        QTimer.singleShot(0, window, window.help_menu.first_start)
    code = app.exec()
    window.session.stop()
    return int(code)


def describe(window: MainWindow) -> str:
    """What the window shows, in words (for logs and tests of the screenshot)."""
    fleet = window.session.fleet
    connected = sum(n.state.value == "connected" for n in fleet)
    points = window.detail.plots.point_count()
    gpus = fleet.gpu_total()
    said = f"{connected}/{len(fleet)} nodes connected, {gpus} GPU tiles, {points} plot points"
    if fleet.moment is not None:
        said += f", showing {utc_text(fleet.moment.wanted_ms)}"
    key = window.detail.key
    if key is not None:
        said += f", detail {fleet.name_of(key.target)}:{key.index}"
    return said


def _save_and_quit(window: MainWindow, path: Path) -> None:
    saved = window.grab().save(str(path))
    if not saved:
        log.error("could not write screenshot %s", path)
    else:
        log.info("screenshot saved to %s: %s", path, describe(window))
    window.close()
    QApplication.exit(0 if saved else 1)  # a script taking screenshots learns it failed
