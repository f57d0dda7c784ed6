"""Wall-display mode: full screen, large type, nothing that changes the fleet.

A NOC's wall screen shows the fleet to a room; nobody at it should kill, assign,
reserve, release, drain, silence or acknowledge by a stray click. While wall
mode is on:

- every entry of a menu and every button of the window that would change the
  fleet is hidden as it is made (`mutates`: the verbs the console's menus and
  buttons begin with), so the tile, process, workload, person and alert menus
  keep only what looks (open, copy, export, show output);
- every drop is refused (no target takes a drag), the kill zone is hidden;
- the window is full screen, its type larger, and a red "WALL MODE" marker
  sits in the status bar saying how to leave;
- every table's header cell is widened where the larger type would not fit it
  (and given back its width on leaving);
- Esc does nothing to it: only the View menu's entry or its shortcut
  (Ctrl+Shift+W) leaves, back to the window state it had before; the status
  bar's hint that says so goes with it.

The filter watches the whole application only while wall mode is on (it sees
every event, so it costs nothing the rest of the time).
"""

from __future__ import annotations

import re
import weakref

from PySide6.QtCore import QEvent, QObject, Qt, QTimer, Signal
from PySide6.QtGui import QActionEvent, QKeyEvent
from PySide6.QtWidgets import (
    QAbstractButton,
    QApplication,
    QHeaderView,
    QLabel,
    QMainWindow,
    QMenu,
    QStyle,
    QWidget,
)

from console.views.window.looks import Looks

SHORTCUT = "Ctrl+Shift+W"
MARKER_TEXT = "WALL MODE · view only"
LEAVE_HINT = f"Wall mode: {SHORTCUT} leaves it"  # the status bar's answer to Esc
# The first word(s) of every menu entry and button that changes the fleet.
MUTATING = ("kill", "assign", "reserve", "release", "drain", "return to placement",
            "mark repaired", "silence", "new silence", "unsilence", "expire", "acknowledge",
            "ack", "cancel workload", "submit")  # fmt: skip
# Larger where a room reads (the tables, tabs, status bar, the GPU's title); the tiles
# size their own text. Not everything: type grown everywhere made the window's least
# size taller than a 1080p wall screen.
LARGE_TYPE = """
QTableView, QHeaderView::section, QTabBar::tab, QStatusBar, QStatusBar QLabel,
QStatusBar QToolButton, QToolBar QLabel, QToolBar QComboBox, QListView { font-size: 13pt; }
QLabel#detailTitle { font-size: 18pt; }
QLabel#wallMarker { font-size: 13pt; }
"""
WALL_HEIGHT_PX = 1080  # the screen LARGE_TYPE is sized for; a taller one scales it up


def large_type(screen_height_px: int) -> str:
    """LARGE_TYPE for a screen this tall: a 4K wall's type twice a 1080p one's (at 13 pt
    its tables and tabs were a desk's size from across the room)."""
    scale = max(1.0, screen_height_px / WALL_HEIGHT_PX)
    return re.sub(
        r"font-size: (\d+)pt",
        lambda size: f"font-size: {round(int(size.group(1)) * scale)}pt",
        LARGE_TYPE,
    )


# Shown again by their panels: hidden each time.
HIDDEN_WIDGETS = ("killZone", "drainZone", "dragHint")


def mutates(text: str) -> bool:
    """Whether a menu entry or button with this text changes the fleet."""
    words = text.replace("&", "").strip().lower()
    return any(words == verb or words.startswith(verb + " ") or words.startswith(verb + "…")
               for verb in MUTATING)  # fmt: skip


class WallMode(QObject):
    toggled = Signal(bool)

    def __init__(self, window: QMainWindow, looks: Looks) -> None:
        super().__init__(window)
        self.setObjectName("gpufleet-wall-mode")
        self._window = window
        self._looks = looks
        self.on = False
        self.marker = QLabel(MARKER_TEXT)
        self.marker.setObjectName("wallMarker")
        self.marker.setToolTip(f"Wall-display mode: nothing here changes the fleet. {SHORTCUT} "
                               "or View ▸ Wall display leaves it.")  # fmt: skip
        self.marker.setVisible(False)
        window.statusBar().addWidget(self.marker)
        self._state_before = window.windowState()
        self._hidden: list[weakref.ref[QWidget]] = []
        # Header sections widened for the large type: (header, section, width before).
        self._widened: list[tuple[weakref.ref[QHeaderView], int, int]] = []

    def set_on(self, on: bool) -> None:
        if on == self.on:
            return
        self.on = on
        app = QApplication.instance()
        assert app is not None
        self.marker.setVisible(on)
        if on:
            self._state_before = self._window.windowState()
            app.installEventFilter(self)
            self._hide_mutating_buttons()
            screen = self._window.screen()
            self._looks.set_extra("wall", large_type(screen.size().height() if screen else 0))
            self._fit_headers()
            # Last: the larger type and the marker resize the layout first.
            self._window.setWindowState(self._state_before | Qt.WindowState.WindowFullScreen)
        else:
            app.removeEventFilter(self)
            self._looks.set_extra("wall", "")
            self._unfit_headers()
            status = self._window.statusBar()
            if status.currentMessage() == LEAVE_HINT:
                status.clearMessage()  # it told how to leave: left, it has nothing to say
            self._window.setWindowState(self._state_before & ~Qt.WindowState.WindowFullScreen)
            for ref in self._hidden:
                widget = ref()
                if widget is not None:
                    widget.setVisible(True)
            self._hidden.clear()
        self.toggled.emit(on)

    def _fit_headers(self) -> None:
        """Widen each header cell the large type would clip: a header's sections keep
        the widths they had (the default, or fitted to the smaller type) when its font
        grows, and Qt then cuts their text or draws the sort arrow over it."""
        for header in self._window.findChildren(QHeaderView):
            if header.orientation() is not Qt.Orientation.Horizontal:
                continue
            last = header.count() - 1
            for section in range(header.count()):
                mode = header.sectionResizeMode(section)
                if header.isSectionHidden(section) or mode in (
                    QHeaderView.ResizeMode.Stretch,
                    QHeaderView.ResizeMode.ResizeToContents,  # Qt refits these itself
                ):
                    continue
                if section == last and header.stretchLastSection():
                    continue
                width, wanted = header.sectionSize(section), header.sectionSizeHint(section)
                if header.isSortIndicatorShown() and header.sortIndicatorSection() == section:
                    wanted += _sort_arrow_px(header)  # beside the text, not over it
                if wanted > width:
                    self._widened.append((weakref.ref(header), section, width))
                    header.resizeSection(section, wanted)

    def _unfit_headers(self) -> None:
        """The widths the header cells had before wall mode."""
        for ref, section, width in reversed(self._widened):
            header = ref()
            if header is not None and section < header.count():
                header.resizeSection(section, width)
        self._widened.clear()

    def _hide_mutating_buttons(self) -> None:
        buttons = self._window.findChildren(QAbstractButton)
        for button in buttons:
            if mutates(button.text()) and not button.isHidden():
                button.setVisible(False)
                self._hidden.append(weakref.ref(button))
        for name in HIDDEN_WIDGETS:
            for widget in self._window.findChildren(QWidget, name):
                if not widget.isHidden():
                    widget.setVisible(False)
                    self._hidden.append(weakref.ref(widget))

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        kind = event.type()
        if kind in (QEvent.Type.DragEnter, QEvent.Type.DragMove, QEvent.Type.Drop):
            event.ignore()  # no target takes it: the cursor says "no"
            return True
        if kind == QEvent.Type.ActionAdded and isinstance(watched, QMenu):
            assert isinstance(event, QActionEvent)
            action = event.action()
            if action is not None and mutates(action.text()):
                action.setVisible(False)
        elif kind == QEvent.Type.Show and isinstance(watched, QMenu) and watched.isEmpty():
            QTimer.singleShot(0, watched.close)  # every entry would have changed something
        elif kind == QEvent.Type.Show and watched.objectName() in HIDDEN_WIDGETS:
            widget = watched
            if isinstance(widget, QWidget) and self._window.isAncestorOf(widget):
                widget.hide()  # at once: deferred, it showed between frames
        elif (
            kind == QEvent.Type.KeyPress
            and isinstance(event, QKeyEvent)
            and event.key() == Qt.Key.Key_Escape
            and watched is self._window
        ):
            # Esc never leaves full screen here (Qt's does not either): say what does.
            self._window.statusBar().showMessage(LEAVE_HINT, 5000)
        return False


def _sort_arrow_px(header: QHeaderView) -> int:
    """The room the sort arrow takes beside a header cell's text (the stylesheet's header
    leaves it out of the cell's size hint: an alert table's "Severity" was cut at 13 pt)."""
    style = header.style()
    return style.pixelMetric(QStyle.PixelMetric.PM_HeaderMarkSize, None, header) + (
        style.pixelMetric(QStyle.PixelMetric.PM_HeaderMargin, None, header)
    )
