"""The "auto" theme follows the desktop's colour scheme live, through the real portal.

The outer test starts what a desktop session has: an X server (Xvfb), a session
D-Bus, and the real xdg-desktop-portal with its GTK backend, which serves the
desktop's `org.freedesktop.appearance color-scheme` from GSettings
(`org.gnome.desktop.interface color-scheme`, kept in a key file of the test's
own). Then it runs this file again inside that session, with Qt's
xdgdesktopportal platform theme. There the console starts dark because the
desktop prefers dark, turns light when `gsettings set` says prefer-light, and
dark again; a theme picked in the View menu stays whatever the desktop says.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication

from console.main_window import MainWindow
from console.session import ConsoleSession
from console.views.common.theme import DARK, LIGHT
from console.views.window.window_looks import WindowLooks
from tests.console.conftest import rerun_inside
from tests.console.xserver import read_line, stop, xvfb

INNER = "GPUFLEET_DESKTOP_SESSION"  # set in the rerun inside the desktop session
# Where the session's GSettings key file lives (the inner tests get their own config dir).
DESKTOP_CONFIG = "GPUFLEET_DESKTOP_CONFIG"
PORTAL = Path("/usr/libexec/xdg-desktop-portal")
PORTAL_GTK = Path("/usr/libexec/xdg-desktop-portal-gtk")
SCHEMA, KEY = "org.gnome.desktop.interface", "color-scheme"
NOT_TESTED = "!!! {what} NOT INSTALLED: following the desktop's colour scheme NOT TESTED; {fix} !!!"
inner = pytest.mark.skipif(
    os.environ.get(INNER) != "1", reason="runs inside the desktop session the last test starts"
)


def set_scheme(value: str, env: dict[str, str] | None = None) -> None:
    """What a desktop's appearance settings do: write the GSettings key."""
    env = env or {**os.environ, "XDG_CONFIG_HOME": os.environ[DESKTOP_CONFIG]}
    subprocess.run(["gsettings", "set", SCHEMA, KEY, value], env=env, check=True, timeout=10)


# -- inside the session ------------------------------------------------------------------


@pytest.fixture
def window(qtbot) -> Iterator[tuple[MainWindow, WindowLooks]]:  # type: ignore[no-untyped-def]
    window = MainWindow(ConsoleSession(["127.0.0.1:1"]))
    qtbot.addWidget(window)
    looks = WindowLooks(window, theme="auto")
    window.show()
    yield window, looks
    set_scheme("prefer-dark")  # as the session started, for the next test


def shown(window: MainWindow) -> tuple[str, str]:
    """The application's window colour and the plots' background, as painted from."""
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    window_colour = app.palette().color(QPalette.ColorRole.Window).name()
    return window_colour, window.detail.plots.backgroundBrush().color().name()


@inner
def test_auto_starts_with_the_desktops_scheme_and_follows_each_change(
    qtbot, window: tuple[MainWindow, WindowLooks]
) -> None:  # type: ignore[no-untyped-def]
    main, looks = window
    hints = QGuiApplication.styleHints()
    assert hints.colorScheme() == Qt.ColorScheme.Dark  # the portal's answer at start
    assert looks.looks.theme is DARK
    assert shown(main) == (DARK.window, DARK.plot_background)
    with qtbot.waitSignal(looks.looks.themeChanged, timeout=10_000) as switched:
        set_scheme("prefer-light")
    assert switched.args == ["light"]
    assert hints.colorScheme() == Qt.ColorScheme.Light
    assert shown(main) == (LIGHT.window, LIGHT.plot_background)
    with qtbot.waitSignal(looks.looks.themeChanged, timeout=10_000) as switched:
        set_scheme("prefer-dark")
    assert switched.args == ["dark"]
    assert shown(main) == (DARK.window, DARK.plot_background)


@inner
def test_a_theme_picked_in_the_view_menu_stays_when_the_desktop_changes(
    qtbot, window: tuple[MainWindow, WindowLooks]
) -> None:  # type: ignore[no-untyped-def]
    main, looks = window
    looks.looks.pick("light")
    hints = QGuiApplication.styleHints()
    for scheme, qt_says in (("prefer-light", Qt.ColorScheme.Light),
                            ("prefer-dark", Qt.ColorScheme.Dark)):  # fmt: skip
        with qtbot.waitSignal(hints.colorSchemeChanged, timeout=10_000):
            set_scheme(scheme)
        assert hints.colorScheme() == qt_says
    # Qt has heard the desktop both times (the signals above); the console kept the pick.
    assert looks.looks.theme is LIGHT and shown(main) == (LIGHT.window, LIGHT.plot_background)


# -- the outer run: X, a session bus, the portal, this file again ------------------------


def portal_scheme(env: dict[str, str]) -> str:
    """The portal's answer for the colour scheme ("" until it answers)."""
    read = subprocess.run(
        ["gdbus", "call", "--session", "--dest", "org.freedesktop.portal.Desktop",
         "--object-path", "/org/freedesktop/portal/desktop",
         "--method", "org.freedesktop.portal.Settings.Read", "org.freedesktop.appearance", KEY],
        env=env, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    return read.stdout.strip() if read.returncode == 0 else ""


@pytest.fixture
def desktop_session(tmp_path: Path) -> Iterator[dict[str, str]]:
    """Xvfb, a session bus and the portal (started on the bus's demand); yields the env."""
    if os.environ.get(INNER) == "1":
        pytest.skip("already running in the desktop session")
    tools = [t for t in ("Xvfb", "dbus-daemon", "gsettings", "gdbus") if shutil.which(t) is None]
    tools += [str(p) for p in (PORTAL, PORTAL_GTK) if not p.exists()]
    if tools:
        pytest.skip(NOT_TESTED.format(what=", ".join(tools),
                                      fix="installer/dev-setup.sh test installs them"))  # fmt: skip
    config, runtime = tmp_path / "config", tmp_path / "runtime"
    config.mkdir()
    runtime.mkdir(mode=0o700)
    env = {**os.environ, "XDG_CONFIG_HOME": str(config), "XDG_RUNTIME_DIR": str(runtime),
           "XDG_CURRENT_DESKTOP": "GNOME",  # the portal's GTK backend serves GNOME sessions
           "GSETTINGS_BACKEND": "keyfile", "NO_AT_BRIDGE": "1"}  # fmt: skip
    set_scheme("prefer-dark", env)  # the desktop's preference before the session starts
    with xvfb() as display:
        env["DISPLAY"] = display
        # The session bus starts the portal and its GTK backend when first asked,
        # with this environment (the display, the key file, the desktop's name).
        bus = subprocess.Popen(["dbus-daemon", "--session", "--nofork", "--print-address=1"],
                               env=env, stdout=subprocess.PIPE, text=True)  # fmt: skip
        try:
            env["DBUS_SESSION_BUS_ADDRESS"] = read_line(bus, 10, "dbus-daemon")
            deadline = time.monotonic() + 30
            while (answer := portal_scheme(env)) != "(<<uint32 1>>,)":
                assert time.monotonic() < deadline, (
                    f"the portal answered {answer!r}, not prefer-dark"
                )
                time.sleep(0.2)  # polling the portal's start-up: it has no ready signal to us
            yield env
        finally:
            stop(bus)  # the portal and its backend leave with their bus


def test_the_console_follows_the_desktops_colour_scheme(
    desktop_session: dict[str, str], tmp_path: Path
) -> None:
    env = {**desktop_session, INNER: "1", DESKTOP_CONFIG: desktop_session["XDG_CONFIG_HOME"],
           "QT_QPA_PLATFORM": "xcb", "QT_QPA_PLATFORMTHEME": "xdgdesktopportal"}  # fmt: skip
    output = rerun_inside(__file__, env, tmp_path, timeout_s=300)
    assert re.search(r"\b2 passed, 1 skipped\b", output), output[-2000:]
