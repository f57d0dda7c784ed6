"""The console in a real X server with a window manager, driven by real input events.

The outer test starts Xvfb (a 3900x2300 screen: room for a 4K window and its
frame) and openbox, then runs this file again inside them through Qt's xcb
platform. There every key and mouse movement is sent by xdotool through the X
server's XTEST extension, as a keyboard and a mouse would send them; the window
manager places, focuses, resizes and makes windows full screen. Against real
daemons over loopback: keyboard-only assign, reserve, silence with a reason and
kill; a process dragged with the mouse onto the kill zone, its drag image
compact, its kill dialog mapped late by the window manager (as under load) and
cancelled with Escape once it has the focus; the window resized by the window
manager to 1366x768 and 3840x2160 with the plots' labels apart (geometry
asserted); the light theme from the View menu and wall mode from its shortcut;
the layout remembered across a restart.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QRectF, Qt, QTimer
from PySide6.QtGui import QDrag, QGuiApplication, QImage, QPainter, QPalette
from PySide6.QtWidgets import QApplication, QDialog, QMenu, QMessageBox, QPushButton, QWidget

from console.fleet.updates import KillReport
from console.main_window import MainWindow
from console.views.alerts.new_silence_dialog import NewSilenceDialog
from console.views.common.choice_dialog import ChoiceDialog
from console.views.common.theme import LIGHT
from console.views.control.control_prompts import ControlPrompts
from console.views.control.reserve_dialog import ReserveDialog
from console.views.detail.kill_dialog import KillDialog
from console.views.plots.gpu_plots import MIN_PLOT_HEIGHT
from console.views.window.wall_mode import WallMode
from console.views.window.window_looks import WindowLooks
from gpufleet.states import WorkloadState
from gpufleet.v1 import node_pb2 as pb
from node_daemon.backends.simulated import SimulatedBackend
from node_daemon.backends.simulated.scenario import Scenario, ScenarioEvent
from tests.console.conftest import ACCOUNTS_HELD, rerun_inside
from tests.console.test_control_e2e import SLEEPER, Console, submit
from tests.console.xserver import window_manager, xvfb

INNER = "GPUFLEET_REAL_X"  # set in the rerun inside the X server
WM_PID = "GPUFLEET_REAL_X_WM_PID"  # the window manager's pid, for the rerun
SLOW_WM_MS = 1000  # how long the window manager takes to map a dialog, as under load
SCREEN = (3900, 2300)
SIZES = ((1366, 768), (3840, 2160))
DRAG_IMAGE_MAX = (320, 48)  # the compact drag image (console/views/common/drag_image.py)
NOT_TESTED = "!!! {what} NOT INSTALLED: the console in a real X server NOT TESTED; {fix} !!!"
inner = pytest.mark.skipif(
    os.environ.get(INNER) != "1", reason="runs inside the X server the last test starts"
)


# -- real input: xdotool through the X server ---------------------------------------


def xdotool(qtbot, *args: str) -> str:  # type: ignore[no-untyped-def]
    """Run xdotool while the Qt event loop keeps running (the window must answer it)."""
    process = subprocess.Popen(
        ["xdotool", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    qtbot.waitUntil(lambda: process.poll() is not None, timeout=20_000)
    out, err = process.communicate()
    assert process.returncode == 0, f"xdotool {' '.join(args)}: {err}"
    return out


def key(qtbot, *keys: str) -> None:  # type: ignore[no-untyped-def]
    xdotool(qtbot, "key", "--delay", "40", *keys)


def type_text(qtbot, text: str) -> None:  # type: ignore[no-untyped-def]
    xdotool(qtbot, "type", "--delay", "40", text)


def focused(qtbot, widget: QWidget) -> None:  # type: ignore[no-untyped-def]
    qtbot.waitUntil(lambda: QApplication.focusWidget() is widget, timeout=5000)


def popup(qtbot) -> QMenu:  # type: ignore[no-untyped-def]
    qtbot.waitUntil(lambda: isinstance(QApplication.activePopupWidget(), QMenu), timeout=5000)
    menu = QApplication.activePopupWidget()
    assert isinstance(menu, QMenu)
    return menu


def dialog_of(qtbot, owner: Callable[[], object], kind: type) -> QWidget:  # type: ignore[no-untyped-def]
    qtbot.waitUntil(lambda: isinstance(owner(), kind), timeout=5000)
    dialog = owner()
    assert isinstance(dialog, QWidget)
    return dialog


def active(qtbot, window: QWidget) -> None:  # type: ignore[no-untyped-def]
    """The window active: the window manager gives it the X input focus."""
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=5000)


def tab_to(qtbot, widget: QWidget, limit: int = 20, back: bool = False) -> None:  # type: ignore[no-untyped-def]
    for _ in range(limit):
        if QApplication.focusWidget() is widget:
            return
        before = QApplication.focusWidget()
        key(qtbot, "shift+Tab" if back else "Tab")

        qtbot.waitUntil(lambda b=before: QApplication.focusWidget() is not b, timeout=3000)
    assert QApplication.focusWidget() is widget, f"Tab never reached {widget!r}"


def finished_ok(qtbot, console: Console, act: Callable[[], None], timeout: int = 15_000):  # type: ignore[no-untyped-def]
    with qtbot.waitSignal(console.window.session.pump.commandFinished, timeout=timeout) as done:
        act()
    assert done.args[0].ok, done.args[0].message
    return done.args[0]


def to_tile(qtbot, console: Console, gpu: int) -> None:  # type: ignore[no-untyped-def]
    grid = console.window.grid
    key(qtbot, "ctrl+g")
    focused(qtbot, grid)
    key(qtbot, "Home", *["Right"] * gpu)
    qtbot.waitUntil(lambda: grid.focus_tile == (console.target, gpu), timeout=5000)


def chooser_from_menu(qtbot, console: Console, letter: str) -> ChoiceDialog:  # type: ignore[no-untyped-def]
    """The focused tile's menu, by the keyboard (Menu, then `letter`): the chooser it
    opens, with the focus on its search field."""
    key(qtbot, "Menu")
    popup(qtbot)
    key(qtbot, letter)
    chooser = dialog_of(qtbot, lambda: console.window.control.place_prompts.dialog, ChoiceDialog)
    assert isinstance(chooser, ChoiceDialog)
    focused(qtbot, chooser.search)
    return chooser


@pytest.fixture
def console(qtbot, open_console) -> Console:  # type: ignore[no-untyped-def]
    opened = open_console()
    active(qtbot, opened.window)
    return opened


# -- keyboard only --------------------------------------------------------------------


@inner
def test_keyboard_only_assign(qtbot, console: Console) -> None:
    workload_id = submit(console)
    qtbot.waitUntil(lambda: console.workload(workload_id) is not None, timeout=5000)
    to_tile(qtbot, console, 2)
    key(qtbot, "Return")
    qtbot.waitUntil(lambda: console.window.grid.selected == (console.target, 2), timeout=5000)
    chooser = chooser_from_menu(qtbot, console, "a")
    assert chooser.verdict_label.text() == f"assign {workload_id} (sleep) to GPU 2 of node-a"
    finished_ok(qtbot, console, lambda: key(qtbot, "Return"))
    assert console.sent == [f"assign {workload_id} (sleep) to GPU 2 of {console.target}"]
    qtbot.waitUntil(
        lambda: console.workload(workload_id).state is WorkloadState.RUNNING, timeout=10_000
    )


@inner
def test_keyboard_only_reserve(qtbot, console: Console) -> None:
    to_tile(qtbot, console, 1)
    chooser = chooser_from_menu(qtbot, console, "r")
    type_text(qtbot, "team:ml")
    qtbot.waitUntil(
        lambda: chooser.verdict_label.text() == "reserve GPU 1 of node-a for team:ml", timeout=5000
    )
    key(qtbot, "Return")
    dialog = dialog_of(qtbot, lambda: console.window.control.prompts.dialog, ReserveDialog)
    assert isinstance(dialog, ReserveDialog)
    focused(qtbot, dialog.reason)
    type_text(qtbot, "training run")
    qtbot.waitUntil(lambda: dialog.reason.text() == "training run", timeout=5000)
    finished_ok(qtbot, console, lambda: key(qtbot, "Return"))
    listed = console.stub.ListReservations(pb.ListReservationsRequest(), timeout=5).reservations
    assert [(list(r.gpu_indices), r.holder, r.reason) for r in listed] == [
        ([1], "team:ml", "training run")
    ]


@inner
def test_keyboard_only_silence_with_a_reason_from_the_alerts_menu(qtbot, open_console) -> None:  # type: ignore[no-untyped-def]
    lost = Scenario((ScenarioEvent(0.2, 1, "lost"),))
    console = open_console(gpus=2, backend=SimulatedBackend(gpu_count=2, scenario=lost, step_s=0.1))
    window = console.window
    panel = window.alerts.alert_panel
    qtbot.waitUntil(lambda: panel.proxy.rowCount() > 0, timeout=20_000)
    active(qtbot, window)
    key(qtbot, "ctrl+1")
    focused(qtbot, panel.table)
    key(qtbot, "Home")
    for _ in range(panel.proxy.rowCount()):
        if [a.rule for a in panel.selected_alerts()] == ["gpu_lost"]:
            break
        key(qtbot, "Down")
    assert [a.rule for a in panel.selected_alerts()] == ["gpu_lost"]
    key(qtbot, "Menu")  # the alert row's menu
    menu = popup(qtbot)
    assert [a.text() for a in menu.actions() if not a.isSeparator()] == [
        "&Acknowledge", "&Silence…", "&Copy summary", "&Open GPU",
    ]  # fmt: skip
    key(qtbot, "s")
    dialog = dialog_of(qtbot, lambda: window.alerts.silence_prompts.dialog, NewSilenceDialog)
    assert isinstance(dialog, NewSilenceDialog)
    focused(qtbot, dialog.comment)
    type_text(qtbot, "card swap scheduled")
    qtbot.waitUntil(lambda: dialog.comment.text() == "card swap scheduled", timeout=5000)
    key(qtbot, "Return")
    fleet = window.session.fleet
    qtbot.waitUntil(lambda: len(fleet.silences.groups()) == 1, timeout=15_000)
    (silence,) = fleet.silences.silences()
    assert silence.comment == "card swap scheduled"


def sleeper_row(console: Console) -> int | None:
    processes = console.window.detail.processes
    rows = range(processes.rowCount())
    return next((r for r in rows if processes.process(r).command == " ".join(SLEEPER)), None)


def run_sleeper_on_gpu2(qtbot, console: Console) -> str:  # type: ignore[no-untyped-def]
    workload_id = submit(console)
    assign = pb.AssignWorkloadRequest(workload_id=workload_id, gpu_indices=[2], actor="alice")
    console.stub.AssignWorkload(assign, timeout=5)
    console.window.grid.select(console.target, 2)
    qtbot.waitUntil(lambda: sleeper_row(console) is not None, timeout=10_000)
    return workload_id


@inner
def test_keyboard_only_kill(qtbot, console: Console) -> None:
    workload_id = run_sleeper_on_gpu2(qtbot, console)
    window = console.window
    table = window.detail.process_table
    active(qtbot, window)
    key(qtbot, "ctrl+p")
    focused(qtbot, table)

    def on_sleeper() -> bool:
        current = table.currentIndex()
        return current.isValid() and table.source_row(current.row()) == sleeper_row(console)

    key(qtbot, "Home")
    for _ in range(3 * window.detail.processes.rowCount()):  # rows may move as they update
        if on_sleeper():
            break
        row = table.currentIndex().row()
        key(qtbot, "Down" if row < table.model().rowCount() - 1 else "Home")
        qtbot.waitUntil(lambda r=row: table.currentIndex().row() != r, timeout=3000)
    assert on_sleeper()
    process = window.detail.processes.process(table.source_row(table.currentIndex().row()))
    assert process.command == "sleep 300"
    focused(qtbot, table)
    key(qtbot, "Menu")
    menu = popup(qtbot)
    assert [a.text() for a in menu.actions()] == [f"Kill pid {process.pid}…"]
    key(qtbot, "Down", "Return")
    dialog = dialog_of(qtbot, lambda: window.control.prompts.dialog, KillDialog)
    assert isinstance(dialog, KillDialog) and dialog.victim.process.pid == process.pid
    focused(qtbot, dialog.grace)
    key(qtbot, "ctrl+a")
    type_text(qtbot, "5")
    qtbot.waitUntil(lambda: dialog.grace_s == 5, timeout=3000)
    kill = dialog.buttons.button(dialog.buttons.StandardButton.Ok)
    assert isinstance(kill, QPushButton)
    # Backwards: in this window under X, Tab from the grace field lands on Cancel, past
    # Kill (one key, two focus moves; QTest's keys and a bare dialog move once).
    tab_to(qtbot, kill, back=True)
    result = finished_ok(qtbot, console, lambda: key(qtbot, "space"), timeout=30_000)
    assert isinstance(result.payload, KillReport) and result.payload.outcome == "terminated"
    assert console.sent == [f"kill pid {process.pid} on node-a GPU 2"]
    qtbot.waitUntil(lambda: console.workload(workload_id).state.ended, timeout=10_000)


# -- the mouse: a drag with a compact image -----------------------------------------------


def slow_window_manager(prompts: ControlPrompts) -> None:
    """The next dialog `prompts` opens is mapped and focused SLOW_WM_MS late, as a
    window manager on a loaded machine does: openbox is stopped (SIGSTOP) meanwhile."""
    wm, opener = int(os.environ[WM_PID]), prompts._open

    def open_late(dialog: QDialog | QMessageBox, on_accept: Callable[[], None]) -> None:
        os.kill(wm, signal.SIGSTOP)
        QTimer.singleShot(SLOW_WM_MS, lambda: os.kill(wm, signal.SIGCONT))
        prompts._open = opener  # type: ignore[method-assign]
        opener(dialog, on_accept)

    prompts._open = open_late  # type: ignore[method-assign]


@inner
def test_a_process_dragged_onto_the_kill_zone_with_a_compact_image(qtbot, console: Console) -> None:
    window = console.window
    # Room for the process table: at 1400x900 it shows less than one row (see the report).
    resize_by_wm(qtbot, window, 2400, 1600)
    run_sleeper_on_gpu2(qtbot, console)
    table, zone = window.detail.process_table, window.detail.kill_zone
    qtbot.waitUntil(zone.isVisible, timeout=5000)
    rows = range(table.model().rowCount())
    view_row = next(r for r in rows if table.source_row(r) == sleeper_row(console))
    index = table.model().index(view_row, 0)
    table.scrollTo(index)
    shown = table.visualRect(index).intersected(table.viewport().rect())
    assert shown.height() >= 8, (shown, table.viewport().rect())
    start = table.viewport().mapToGlobal(shown.center())
    end = zone.mapToGlobal(zone.rect().center())
    images: list[tuple[int, int]] = []

    def look() -> None:  # runs inside QDrag.exec's own event loop
        for drag in table.findChildren(QDrag):
            pixmap = drag.pixmap()
            ratio = pixmap.devicePixelRatio() or 1.0
            images.append((round(pixmap.width() / ratio), round(pixmap.height() / ratio)))

    watch = QTimer()
    watch.setObjectName("drag-image-watch")
    watch.timeout.connect(look)
    watch.start(30)
    try:
        # One xdotool run for the whole gesture: QDrag.exec holds the GUI thread's loop.
        steps: list[str] = []
        for i in range(1, 9):  # in steps, as a hand moves: the view starts its drag
            x = start.x() + (end.x() - start.x()) * i // 8
            y = start.y() + (end.y() - start.y()) * i // 8
            steps += ["mousemove", str(x), str(y), "sleep", "0.03"]
        # Quick, as a hand is: the table's rows are rebuilt each frame, and a rebuild
        # between the press and the drag's start forgets the press.
        press = ["mousemove", str(start.x()), str(start.y()), "sleep", "0.1", "mousedown", "1"]
        slow_window_manager(window.control.prompts)
        xdotool(qtbot, *press, *steps, "sleep", "0.6", "mouseup", "1")
        dialog = dialog_of(qtbot, lambda: window.control.prompts.dialog, KillDialog)
    finally:
        watch.stop()
    assert isinstance(dialog, KillDialog) and dialog.victim.process.command == "sleep 300"
    assert images, "no drag seen under the process table"
    width, height = max(images)
    assert width <= DRAG_IMAGE_MAX[0] and height <= DRAG_IMAGE_MAX[1], images[-1]
    # The key goes where the X input focus is: to the dialog only once the window manager
    # has mapped and focused it, which under load comes well after `prompts.dialog` is
    # set. Sent before, Escape went to the main window and the dialog stayed open.
    qtbot.waitUntil(lambda: QApplication.activeWindow() is dialog, timeout=5000)
    key(qtbot, "Escape")  # Cancel: nothing dies
    qtbot.waitUntil(lambda: window.control.prompts.dialog is None, timeout=5000)
    assert console.sent == []


# -- sizes: the window manager resizes the window ------------------------------------------


def label_rects(window: MainWindow) -> list[tuple[str, QRectF]]:
    """Every plot's axis labels and title, in the plots' scene coordinates."""
    plots = window.detail.plots
    image = QImage(4, 4, QImage.Format.Format_ARGB32)  # kept while the painter paints on it
    painter = QPainter(image)
    found: list[tuple[str, QRectF]] = []
    try:
        for metric, plot in plots._plots.items():
            for side in ("left", "bottom"):
                axis = plot.getAxis(side)
                if not axis.isVisible():
                    continue
                specs = axis.generateDrawSpecs(painter)
                if specs is None:
                    continue
                for rect, _flags, text in specs[2]:
                    found.append((f"{metric} {side} {text}", axis.mapRectToScene(rect)))
            title = plot.titleLabel
            if title.isVisible() and title.text:
                found.append((f"{metric} title", title.mapRectToScene(title.itemRect())))
    finally:
        painter.end()
    return found


def assert_labels_apart(window: MainWindow) -> None:
    rects = label_rects(window)
    assert len(rects) >= 8, rects  # every plot labelled
    overlaps = [
        (a, b)
        for i, (a, ra) in enumerate(rects)
        for b, rb in rects[i + 1 :]
        if ra.intersected(rb).width() > 0.5 and ra.intersected(rb).height() > 0.5
    ]
    assert overlaps == []
    for plot in window.detail.plots._plots.values():
        assert plot.geometry().height() >= MIN_PLOT_HEIGHT - 1


def resize_by_wm(qtbot, window: MainWindow, width: int, height: int) -> None:  # type: ignore[no-untyped-def]
    xdotool(qtbot, "windowsize", str(int(window.winId())), str(width), str(height))
    try:
        qtbot.waitUntil(lambda: (window.width(), window.height()) == (width, height), timeout=5000)
    except Exception:
        least = window.minimumSizeHint()
        raise AssertionError(
            f"asked {width}x{height}, the window is {window.width()}x"
            f"{window.height()} (its least size {least.width()}x{least.height()})"
        ) from None


@inner
@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_resized_by_the_window_manager_the_plots_stay_readable(
    qtbot, console: Console, size: tuple[int, int]
) -> None:
    window = console.window
    window.grid.select(console.target, 1)
    qtbot.waitUntil(lambda: window.detail.plots.point_count() > 2, timeout=15_000)
    resize_by_wm(qtbot, window, *size)
    qtbot.waitUntil(lambda: window.detail.plots.width() > 0, timeout=5000)
    QApplication.processEvents()
    assert_labels_apart(window)


# -- looks: the light theme and wall mode, through the real window -------------------------


@inner
def test_light_from_the_view_menu_and_wall_mode_from_its_shortcut(qtbot, console: Console) -> None:
    window = console.window
    looks = window.findChild(WindowLooks)
    assert isinstance(looks, WindowLooks)
    key(qtbot, "alt+v")  # View
    popup(qtbot)
    key(qtbot, "t")  # Theme ▸
    qtbot.waitUntil(lambda: QApplication.activePopupWidget() is not None
                    and QApplication.activePopupWidget().objectName() == "themeMenu",
                    timeout=5000)  # fmt: skip
    key(qtbot, "l")  # Light
    qtbot.waitUntil(lambda: looks.looks.theme is LIGHT, timeout=5000)
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    assert app.palette().color(QPalette.ColorRole.Window).name() == LIGHT.window
    assert window.detail.plots.backgroundBrush().color().name() == LIGHT.plot_background
    before = window.geometry()
    wall = window.findChild(WallMode)
    assert isinstance(wall, WallMode)
    active(qtbot, window)
    key(qtbot, "ctrl+shift+w")
    screen = QGuiApplication.primaryScreen().geometry()
    qtbot.waitUntil(lambda: wall.on and window.geometry() == screen, timeout=10_000)
    assert window.isFullScreen() and wall.marker.isVisible()
    assert not window.alerts.alert_panel.acknowledge.isVisibleTo(window)
    key(qtbot, "Escape")
    # The window manager had the chance to act on it: still full screen.
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        QApplication.processEvents()
    assert wall.on and window.geometry() == screen
    key(qtbot, "ctrl+shift+w")
    qtbot.waitUntil(lambda: not wall.on and window.geometry() == before, timeout=10_000)
    assert looks.looks.theme is LIGHT  # leaving wall mode keeps the theme


@inner
def test_the_layout_comes_back_after_a_restart(qtbot, open_console) -> None:  # type: ignore[no-untyped-def]
    first = open_console().window
    resize_by_wm(qtbot, first, 1700, 1000)
    first.resizeDocks([first.detail_dock], [700], Qt.Orientation.Horizontal)
    qtbot.waitUntil(lambda: first.detail_dock.width() == 700, timeout=5000)
    first.close()
    again = open_console(size=None).window  # the same profile: its layout file
    qtbot.waitUntil(lambda: (again.width(), again.height()) == (1700, 1000), timeout=10_000)
    assert again.detail_dock.width() == 700


# -- the outer run: Xvfb, openbox, this file again ------------------------------------------


@pytest.fixture
def x_server() -> Iterator[tuple[str, int]]:
    """Xvfb and openbox on a display of their own; yields the display and openbox's pid."""
    if os.environ.get(INNER) == "1":
        pytest.skip("already running in the X server")
    missing = [tool for tool in ("Xvfb", "openbox", "xdotool") if shutil.which(tool) is None]
    if missing:
        pytest.skip(NOT_TESTED.format(what=", ".join(missing),
                                      fix="installer/dev-setup.sh test installs them"))  # fmt: skip
    with xvfb(SCREEN) as display, window_manager(display) as wm:
        yield display, wm


def test_the_console_in_a_real_x_server_with_a_window_manager(
    x_server: tuple[str, int], held_accounts: None, tmp_path: Path
) -> None:
    """The rerun uses the test accounts this run holds (see conftest's held_accounts)."""
    display, wm = x_server
    env = {**os.environ, "DISPLAY": display, WM_PID: str(wm), "QT_QPA_PLATFORM": "xcb",
           INNER: "1", ACCOUNTS_HELD: "1"}  # fmt: skip
    output = rerun_inside(__file__, env, tmp_path, timeout_s=600)
    assert re.search(r"\b9 passed, 1 skipped\b", output), output[-2000:]
