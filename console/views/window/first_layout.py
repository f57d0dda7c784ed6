"""The window's first start (no saved layout): fitted to its screen, its parts shared out.

A 1366x768 laptop, a 1920x1080 desk and a 3840x2160 wall each get the whole
screen (maximised; the window manager keeps its panels) with the grid, the GPU
detail and the alert list visible together: the detail takes a share of the
width and the whole height beside them, the alert list enough rows for the
height (never fewer than MIN_ALERT_ROWS), the grid the rest. What a person then
changes is remembered (console/qt/ui_state.py) and wins at the next start.

Offscreen (screenshots, tests) there is no real screen: the window takes
OFFSCREEN_ROOM, the size of the README's picture.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QRect, QSize, Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QDockWidget, QMainWindow, QTableView

OFFSCREEN_ROOM = QSize(1600, 900)
MIN_ALERT_ROWS = 5
ALERT_SHARE = 0.2  # of the screen's height, in rows, for the alert list
DETAIL_SHARE = 0.38  # of the screen's width for the GPU detail
DETAIL_WIDTH = (500, 1500)  # px: its facts readable; the rest of a wall to the grid


@dataclass(frozen=True)
class Shares:
    """How a window's room is shared out between its parts."""

    detail_width: int  # px
    alert_rows: int  # rows of the alert table in view


def shares(room: QSize, row_px: int) -> Shares:
    """The parts' shares of a window (or screen) of `room`, alert table rows `row_px` high."""
    low, high = DETAIL_WIDTH
    detail = max(low, min(high, round(room.width() * DETAIL_SHARE)))
    rows = max(MIN_ALERT_ROWS, round(room.height() * ALERT_SHARE) // max(1, row_px))
    return Shares(detail, rows)


def screen_room(window: QMainWindow) -> tuple[QRect, bool]:
    """The free area of the window's screen and whether it is a real one to maximise on."""
    if QGuiApplication.platformName() == "offscreen":
        return QRect(0, 0, OFFSCREEN_ROOM.width(), OFFSCREEN_ROOM.height()), False
    screen = window.screen() or QGuiApplication.primaryScreen()
    return screen.availableGeometry(), True


def fit_to_screen(window: QMainWindow) -> None:
    """A first start: `window` takes its screen's free area, maximised on a real screen
    (before it shows); MainWindow shares it out between its parts once shown."""
    room, real = screen_room(window)
    window.setGeometry(room)
    if real:
        window.setWindowState(window.windowState() | Qt.WindowState.WindowMaximized)


def share_out(
    window: QMainWindow, docks: tuple[QDockWidget, QDockWidget], table: QTableView
) -> Shares:
    """The GPU detail's width and the alert rows for the window's size, once it is laid
    out: the alert dock grown or shrunk by the rows its table lacks."""
    detail, alerts = docks
    row_px = table.verticalHeader().defaultSectionSize()
    layout = shares(window.size(), row_px)
    window.resizeDocks([detail], [layout.detail_width], Qt.Orientation.Horizontal)
    shown = table.viewport().height()
    # Room for a horizontal scroll bar too: wide columns on a narrow screen show one
    # only once the rows arrive, and it must not take the fifth row.
    bar = table.horizontalScrollBar().sizeHint().height()
    wanted = layout.alert_rows * row_px + (0 if table.horizontalScrollBar().isVisible() else bar)
    window.resizeDocks([alerts], [alerts.height() + wanted - shown], Qt.Orientation.Vertical)
    laid_out = window.layout()
    if laid_out is not None:
        laid_out.activate()  # the parts take their sizes now, not a frame later
    return layout
