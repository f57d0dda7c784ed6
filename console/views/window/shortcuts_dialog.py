"""The keyboard's map: every shortcut of the console, in one dialog (F1 or ?).

WINDOW_KEYS are the window's own shortcuts; MainWindow binds exactly these, so
the list cannot drift from what the keys do. The rest are the keys of the grid,
the tables and the dialogs, as their widgets implement them.
"""

from __future__ import annotations

from html import escape

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QVBoxLayout, QWidget

# name -> the key sequences MainWindow binds to it (QKeySequence's portable text).
WINDOW_KEYS: dict[str, tuple[str, ...]] = {
    "shortcuts": ("F1", "?"),
    "grid": ("Ctrl+G",),
    "search": ("Ctrl+F",),
    "processes": ("Ctrl+P",),
    "mute": ("Ctrl+M",),
    "tabs": tuple(f"Ctrl+{n}" for n in range(1, 9)),
}

SECTIONS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    ("Window", (
        ("F1, ?", "this list of shortcuts"),
        ("Ctrl+G", "go to the fleet grid"),
        ("Ctrl+F", "find a GPU (node:index), node, user, Slurm job, container or UUID; "
                   "Enter: the next match; Esc: back to the grid, on the match"),
        ("Ctrl+P", "go to the selected GPU's processes"),
        ("Ctrl+1 … Ctrl+8", "open a bottom tab: Alerts, Events, Workloads, People, "
                            "Inventory, Usage, Audit, Reservations"),
        ("Ctrl+M", "mute the sound of critical alerts (again: unmute)"),
        ("Ctrl+Z", "undo the last release of a reservation (for 8 seconds after it)"),
        ("Ctrl+Shift+W", "wall display: full screen, large type, nothing to change "
                         "(again: leave; Esc does not)"),
        ("Tab, Shift+Tab", "move between the grid, the detail, the tabs and their controls"),
        ("Ctrl+Q", "quit the console (File, Quit: as closing the window)"),
    )),
    ("Fleet grid", (
        ("← →", "previous or next GPU of the node (or group)"),
        ("↑ ↓", "the GPU above or below, across nodes"),
        ("Home, End", "the node's first or last GPU"),
        ("Ctrl+Home, Ctrl+End", "the fleet's first or last GPU"),
        ("Enter", "open the GPU: detail, plots and processes (as a click)"),
        ("Space", "add the GPU to the selection, or take it out (as Ctrl+click)"),
        ("Esc", "back to the one GPU shown in the detail"),
        ("Menu, Shift+F10", "the GPU's menu: assign a queued workload here, reserve for…, "
                            "release, cancel, drain, mark repaired"),
    )),
    ("Replay: the fleet at a past moment", (
        ("Ctrl+T", "go to the timeline under the grid"),
        ("← →, Shift+← →", "the cursor a sample back or on (Shift: ten); past the end: live"),
        ("Space", "play or pause (the speed beside ▶ Play); pauses on a new critical"),
        ("Page Up, Page Down", "the previous or next alert's raise"),
        ("Home, End", "the window's start; live"),
        ("Esc, L", "back to live (while the past is shown)"),
    )),
    ("Tables and lists", (
        ("Menu, Shift+F10", "a workload's menu: cancel, assign to GPU…, show output"),
        ("", "a person's: reserve a GPU for…, release their reservations…"),
        ("", "a process's (Ctrl+P): kill…"),
        ("↑ ↓, Page Up, Page Down", "move between rows"),
        ("Ctrl+Tab, Ctrl+Shift+Tab", "next or previous page of the tabs the focus is in"),
    )),
    ("Menus and dialogs", (
        ("↑ ↓, Enter", "choose a menu entry (or its underlined letter)"),
        ("typing", "a dialog opens in the field to fill: the reason, the command, the search"),
        ("Enter", "OK once the form is complete (a kill's Enter is Cancel: Tab to Kill)"),
        ("Esc", "cancel"),
        ("↑ ↓ while searching", "move in a chooser's list without leaving the search line"),
    )),
)  # fmt: skip


def shortcuts_html() -> str:
    """The list as an HTML table, one section after another."""
    rows = []
    for section, keys in SECTIONS:
        rows.append(f"<tr><th colspan='2' align='left'><br>{escape(section)}</th></tr>")
        rows += [
            f"<tr><td><b>{escape(key)}</b>&nbsp;&nbsp;</td><td>{escape(what)}</td></tr>"
            for key, what in keys
        ]
    return "<table cellspacing='2'>" + "".join(rows) + "</table>"


class ShortcutsDialog(QDialog):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("shortcutsDialog")
        self.setWindowTitle("Keyboard shortcuts")
        self.text = QLabel(shortcuts_html())
        self.text.setObjectName("shortcutsText")
        self.text.setTextFormat(Qt.TextFormat.RichText)
        # Unwrapped: a wrapped rich-text label's height-for-width cut the last rows off.
        self.text.setWordWrap(False)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.text)
        layout.addWidget(buttons)
