"""Looks: which theme the console shows, switched at run time, following the desktop.

The `theme` setting chooses "dark", "light" or "auto"; "auto" follows the
desktop's colour scheme (Qt 6's QStyleHints.colorScheme) and switches when the
desktop does. A switch sets the application's palette and stylesheet, then
restyles the window's plots (their colours are pyqtgraph's, not the
stylesheet's). Extra rules (wall mode's large type) ride on the same
stylesheet, so a theme switch keeps them.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication, QWidget

from console.views.common import theme as themes
from console.views.common.theme import Theme
from console.views.plots.theme_plots import style_plots

log = logging.getLogger(__name__)
Role = QPalette.ColorRole
Group = QPalette.ColorGroup


def desktop_dark() -> bool | None:
    """The desktop's colour scheme: dark, light, or None where it says none."""
    scheme = QGuiApplication.styleHints().colorScheme()
    if scheme == Qt.ColorScheme.Dark:
        return True
    return False if scheme == Qt.ColorScheme.Light else None


def palette(theme: Theme) -> QPalette:
    """Qt's palette for a theme: what the style paints that no stylesheet rule covers."""
    colours = {
        Role.Window: theme.window, Role.WindowText: theme.text, Role.Base: theme.base,
        Role.AlternateBase: theme.button, Role.Text: theme.text, Role.Button: theme.button,
        Role.ButtonText: theme.text, Role.Highlight: theme.highlight,
        Role.HighlightedText: theme.highlighted_text, Role.ToolTipBase: theme.tooltip,
        Role.ToolTipText: theme.tooltip_text, Role.Link: theme.link,
        Role.PlaceholderText: theme.disabled_text, Role.BrightText: theme.highlighted_text,
    }  # fmt: skip
    result = QPalette()
    for role, colour in colours.items():
        result.setColor(role, QColor(colour))
    for role in (Role.WindowText, Role.Text, Role.ButtonText):
        result.setColor(Group.Disabled, role, QColor(theme.disabled_text))
    return result


def apply_to_app(theme: Theme, extra: str = "") -> None:
    """Give the whole application (windows, dialogs, menus) the theme's palette and style."""
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    themes.set_current(theme)
    # The same again is left alone: Qt repolishes every widget of the application on
    # each call, for nothing then (a window built in the theme the application has).
    colours, sheet = palette(theme), theme.stylesheet() + extra
    if app.palette() != colours:
        app.setPalette(colours)
    if app.styleSheet() != sheet:
        app.setStyleSheet(sheet)


class Looks(QObject):
    """The theme of `window` (and the whole application, dialogs and menus included)."""

    themeChanged = Signal(str)  # the theme's name, after a switch

    def __init__(self, window: QWidget, choice: str = "auto") -> None:
        super().__init__(window)
        self.setObjectName("gpufleet-looks")
        self._window = window
        self._choice = themes.check_choice(choice)
        self._extra: dict[str, str] = {}  # name -> stylesheet rules added to the theme's
        self.picked = False  # whether a person chose the theme here (View menu)
        self.theme = themes.resolve(self._choice, desktop_dark())
        hints = QGuiApplication.styleHints()
        hints.colorSchemeChanged.connect(self._on_hints_color_scheme_changed)
        self.apply()

    @property
    def choice(self) -> str:
        return self._choice

    def set_choice(self, choice: str) -> None:
        """ "auto", "dark" or "light"; ThemeError for anything else."""
        self._choice = themes.check_choice(choice)
        self.apply()

    def pick(self, choice: str) -> None:
        """A person's choice (the View menu): remembered for the next start."""
        self.picked = True
        self.set_choice(choice)

    def set_extra(self, name: str, rules: str) -> None:
        """Add (or with "" drop) stylesheet rules kept across theme switches."""
        if rules:
            self._extra[name] = rules
        else:
            self._extra.pop(name, None)
        self.apply()

    def apply(self) -> None:
        self.theme = themes.resolve(self._choice, desktop_dark())
        apply_to_app(self.theme, "\n".join(["", *self._extra.values()]))
        style_plots(self._window, self.theme)
        log.debug("theme %s (setting %s)", self.theme.name, self._choice)
        self.themeChanged.emit(self.theme.name)

    def _on_hints_color_scheme_changed(self, _scheme: Qt.ColorScheme) -> None:
        if self._choice == "auto":
            self.apply()
