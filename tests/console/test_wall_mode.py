"""Wall-display mode against a real daemon: full screen, large type, a marker, nothing
that changes the fleet (menus, buttons, drags), Esc keeps it, its shortcut leaves it."""

from __future__ import annotations

import argparse
import re

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QDragEnterEvent, QFont, QFontMetrics
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QHeaderView, QMainWindow, QMenu, QStyle

from console.cli import add_console_command
from console.main_window import MainWindow
from console.qt import roles
from console.session import ConsoleSession
from console.views.common.theme import DARK
from console.views.window.looks import apply_to_app
from console.views.window.wall_mode import (
    LARGE_TYPE,
    LEAVE_HINT,
    MARKER_TEXT,
    SHORTCUT,
    WallMode,
    mutates,
)
from console.views.window.window_looks import WindowLooks
from gpufleet.v1 import node_pb2 as pb
from node_daemon.backends.simulated import SimulatedBackend
from node_daemon.backends.simulated.scenario import Scenario, ScenarioEvent
from tests.console.test_control_e2e import SLEEPER, Console, _in_hours, submit, workload_mime

pytestmark = pytest.mark.qt_log_ignore(
    "This plugin does not support (grabbing the keyboard|raise)", extend=True
)


def looks_of(console: Console) -> WindowLooks:
    looks = console.window.findChild(WindowLooks)
    assert isinstance(looks, WindowLooks)
    return looks


def shown_entries(menu: QMenu) -> list[str]:
    return [a.text() for a in menu.actions() if a.isVisible() and not a.isSeparator()]


def every_menu(console: Console, workload_id: str) -> dict[str, list[str]]:
    """The visible entries of each row menu the window has, built as a click builds them."""
    window, target = console.window, console.target
    processes = window.detail.processes
    rows = range(processes.rowCount())
    sleeper = next(r for r in rows if processes.process(r).command == " ".join(SLEEPER))
    alert_row = window.alerts.alert_panel.proxy.index(0, 0)
    return {
        "tile": shown_entries(window.grid.context_menu(target, 2)),
        "process": shown_entries(window.detail.process_menu(sleeper)),
        "workload": shown_entries(
            window.control.workload_panel.row_menu(console.workload(workload_id))  # type: ignore[arg-type]
        ),
        "person": shown_entries(window.control.people_panel.person_menu("alice")),
        "alert": shown_entries(window.alerts.alert_panel.row_menu(alert_row)),
    }


def test_the_wall_flag() -> None:
    parser = argparse.ArgumentParser()
    add_console_command(parser.add_subparsers())
    assert parser.parse_args(["console", "--wall"]).wall is True
    assert parser.parse_args(["console"]).wall is False


def test_mutating_words() -> None:
    changing = ("Kill pid 4…", "&Assign to GPU…", "Re&lease alice's reservations…",
                "Drain from placement…", "Silence…", "Acknowledge", "Cancel workload w1",
                "Return to placement", "Mark repaired (clear health)…", "Submit…")  # fmt: skip
    for text in changing:
        assert mutates(text), text
    for text in ("&Copy summary", "&Open GPU", "Show &output…", "Reset zoom", "Cancel",
                 "Export visible range as CSV…", "Live"):  # fmt: skip
        assert not mutates(text), text


def test_wall_mode_shows_and_changes_nothing(qtbot, open_console) -> None:  # type: ignore[no-untyped-def]
    # GPU 3 falls off the bus: an alert to acknowledge and silence.
    lost = Scenario((ScenarioEvent(0.2, 3, "lost"),))
    console = open_console(backend=SimulatedBackend(gpu_count=4, scenario=lost, step_s=0.1))
    window = console.window
    # Something of every other kind to act on: a running sleeper on GPU 2, a
    # reservation on GPU 1, a queued workload.
    running = submit(console)
    console.stub.AssignWorkload(
        pb.AssignWorkloadRequest(workload_id=running, gpu_indices=[2], actor="alice"), timeout=5
    )
    reserve = pb.ReserveRequest(gpu_indices=[1], holder="alice", reason="paper",
                                until_unix_ms=_in_hours(2), actor="alice")  # fmt: skip
    console.stub.Reserve(reserve, timeout=5)
    queued = submit(console)
    gpu1 = window.session.items.gpu_index(console.target, 1)
    qtbot.waitUntil(lambda: gpu1.data(roles.RESERVATION_ROLE) is not None, timeout=10_000)
    window.grid.select(console.target, 2)
    processes = window.detail.processes
    qtbot.waitUntil(
        lambda: any(
            processes.process(r).command == " ".join(SLEEPER) for r in range(processes.rowCount())
        ),
        timeout=10_000,
    )
    qtbot.waitUntil(lambda: console.workload(queued) is not None, timeout=5000)
    qtbot.waitUntil(lambda: window.alerts.alert_panel.proxy.rowCount() > 0, timeout=20_000)
    looks = looks_of(console)
    wall = looks.wall
    before = every_menu(console, queued)
    assert all(any(mutates(t) for t in entries) for entries in before.values()), before
    buttons = [window.alerts.alert_panel.acknowledge, window.alerts.alert_panel.silence,
               window.control.workload_panel.submit, window.alerts.silence_panel.new]  # fmt: skip
    assert not any(b.isHidden() for b in buttons)
    assert window.detail.kill_zone.isVisibleTo(window)
    mime = workload_mime(console, queued)
    assert accepted_drag(window.grid, mime, window)

    # On, from the View menu's entry (its shortcut is tested on the way out).
    looks.menu.wall.trigger()

    assert wall.on and window.isFullScreen()
    assert wall.marker.isVisible() and wall.marker.text() == MARKER_TEXT
    assert SHORTCUT in wall.marker.toolTip() and LARGE_TYPE in QApplication.instance().styleSheet()  # type: ignore[union-attr]
    after = every_menu(console, queued)
    assert {k: [t for t in v if mutates(t)] for k, v in after.items()} == {k: [] for k in after}
    assert "&Copy summary" in after["alert"] and "&Open GPU" in after["alert"]
    assert all(b.isHidden() for b in buttons)
    window.detail.refresh()  # the panel shows its kill zone again on each refresh...
    qtbot.waitUntil(lambda: not window.detail.kill_zone.isVisibleTo(window), timeout=2000)
    assert not accepted_drag(window.grid, mime, window)  # ...and no target takes a drag
    window.activateWindow()
    QTest.keyClick(window, Qt.Key.Key_Escape)
    assert wall.on and looks.menu.wall.isChecked()  # Esc is no way out
    assert console.sent == []

    # Off, with its shortcut: back as it was.
    QTest.keySequence(window, SHORTCUT)
    assert not wall.on and not window.isFullScreen() and not wall.marker.isVisible()
    assert window.windowState() == Qt.WindowState.WindowNoState  # as before
    assert not looks.menu.wall.isChecked()
    assert not any(b.isHidden() for b in buttons)
    assert LARGE_TYPE not in QApplication.instance().styleSheet()  # type: ignore[union-attr]
    assert accepted_drag(window.grid, mime, window)
    assert every_menu(console, queued) == before


def accepted_drag(widget, mime, window) -> bool:  # type: ignore[no-untyped-def]
    """A drag entering over GPU 0's tile, through the application (its filters included)."""
    tile = widget.tile_rect(window.session.fleet.nodes()[0].target, 0)
    where = tile.center() if tile else QPoint(5, 5)
    buttons, keys = Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier
    enter = QDragEnterEvent(where, Qt.DropAction.CopyAction, mime, buttons, keys)
    enter.setAccepted(False)
    QApplication.sendEvent(widget, enter)
    return enter.isAccepted()


def test_a_window_built_in_wall_mode_starts_full_screen(qtbot) -> None:  # type: ignore[no-untyped-def]
    from console.app import build_window
    from console.views.common.theme import DARK
    from console.views.window.looks import apply_to_app

    window = build_window(["127.0.0.1:1"], profile="wall", wall=True)
    qtbot.addWidget(window)
    try:
        window.show()
        wall = window.findChild(WallMode)
        assert isinstance(wall, WallMode) and wall.on
        assert window.windowState() & Qt.WindowState.WindowFullScreen
        assert not window.alerts.alert_panel.acknowledge.isVisibleTo(window)
    finally:
        window.session.stop()
        wall.set_on(False)
        apply_to_app(DARK)


# -- the header cells and the hint, in a window fed by nothing -----------------------------

LARGE_PT = float(re.search(r"font-size: (\d+)pt", LARGE_TYPE).group(1))  # type: ignore[union-attr]
PADDING = 3  # the themes' QHeaderView::section padding, each side


def clipped_header_cells(window: QMainWindow) -> list[tuple[str, str, int, int]]:
    """(table, header text, width, width its text needs in wall mode's type) of every cell
    whose text does not fit (a stretching section takes what the table has left: not counted)."""
    font = QFont(window.font())
    font.setPointSizeF(LARGE_PT)
    metrics = QFontMetrics(font)
    found = []
    for header in window.findChildren(QHeaderView):
        if header.orientation() is not Qt.Orientation.Horizontal:
            continue
        model = header.model()
        for section in range(header.count()):
            stretches = header.sectionResizeMode(section) is QHeaderView.ResizeMode.Stretch or (
                section == header.count() - 1 and header.stretchLastSection()
            )
            if header.isSectionHidden(section) or stretches:
                continue
            text = str(model.headerData(section, Qt.Orientation.Horizontal) or "")
            needs = metrics.horizontalAdvance(text) + 2 * PADDING
            if header.isSortIndicatorShown() and header.sortIndicatorSection() == section:
                style = header.style()  # the arrow beside the text, not over it
                needs += style.pixelMetric(QStyle.PixelMetric.PM_HeaderMarkSize, None, header)
                needs += style.pixelMetric(QStyle.PixelMetric.PM_HeaderMargin, None, header)
            if needs > header.sectionSize(section):
                table = header.parent().objectName() if header.parent() else "?"
                found.append((table, text, header.sectionSize(section), needs))
    return found


def header_widths(window: QMainWindow) -> list[list[int]]:
    return [[h.sectionSize(s) for s in range(h.count())]
            for h in window.findChildren(QHeaderView)]  # fmt: skip


def test_wall_mode_fits_every_header_cell_and_its_hint_leaves_with_it(qtbot) -> None:  # type: ignore[no-untyped-def]
    session = ConsoleSession(["127.0.0.1:9"])  # nothing listens: no daemon needed here
    window = MainWindow(session)
    qtbot.addWidget(window)
    looks = WindowLooks(window, "wall-headers", "dark")
    window.resize(1366, 768)
    window.show()
    qtbot.waitExposed(window)
    try:
        before = header_widths(window)
        assert clipped_header_cells(window)  # the desk's widths are too narrow for 13 pt
        looks.menu.wall.trigger()
        assert looks.wall.on
        assert clipped_header_cells(window) == []
        window.activateWindow()
        QTest.keyClick(window, Qt.Key.Key_Escape)
        assert window.statusBar().currentMessage() == LEAVE_HINT  # Esc: how to leave
        looks.menu.wall.trigger()
        assert not looks.wall.on
        assert window.statusBar().currentMessage() == ""  # left: the hint is gone at once
        assert header_widths(window) == before  # the desk's widths again
    finally:
        looks.wall.set_on(False)
        session.stop()
        apply_to_app(DARK)


def test_the_gpu_title_wraps_in_wall_mode_rather_than_being_cut(qtbot) -> None:  # type: ignore[no-untyped-def]
    from tests.console.test_plots_time import TARGET, feed

    session = ConsoleSession([TARGET])
    session.connections.start()  # dialing no node: fed by hand
    window = MainWindow(session)
    qtbot.addWidget(window)
    looks = WindowLooks(window, "wall-title", "dark")
    feed(window)
    window.resize(1366, 768)
    window.show()
    window.grid.select(TARGET, 3)
    title = window.detail.title
    try:
        looks.wall.set_on(True)
        window.setWindowState(Qt.WindowState.WindowNoState)  # offscreen: no real full screen
        window.resize(1366, 768)
        window.grab()  # laid out in the large type
        metrics = QFontMetrics(title.font())
        assert title.font().pointSizeF() == 18.0
        assert title.visibleRegion().boundingRect().width() >= title.width()  # none past the edge
        assert metrics.horizontalAdvance(title.text()) > title.contentsRect().width()  # too long
        # ... so it takes a second line: every word of it in sight.
        assert title.contentsRect().height() >= 2 * metrics.lineSpacing()
    finally:
        looks.wall.set_on(False)
        session.stop()
        apply_to_app(DARK)


def test_a_4k_wall_gets_twice_a_1080p_walls_type() -> None:
    """Helper screenshots at 3840x2160: only the tiles grew; tables, tabs and the GPU's
    title stayed a desk's 13 and 18 pt, unreadable from across the room."""
    from console.views.window.wall_mode import LARGE_TYPE, large_type

    assert large_type(768) == large_type(1080) == LARGE_TYPE  # never smaller than a desk's
    sizes = [int(n) for n in re.findall(r"font-size: (\d+)pt", large_type(2160))]
    assert sizes == [2 * int(n) for n in re.findall(r"font-size: (\d+)pt", LARGE_TYPE)]
    assert "font-size: 36pt" in large_type(2160)  # the GPU's title
