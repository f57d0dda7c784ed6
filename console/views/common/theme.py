"""The console's two themes, dark and light: their colours and their stylesheets.

A theme is plain data: the widget stylesheet (`resources/styles/<name>.qss`), the
palette Qt's style paints what a stylesheet leaves alone with, and the colours
of what is painted by hand (the pyqtgraph plots). Which theme is shown is
decided by `resolve`: the `theme` setting ("auto", "dark" or "light"), where
"auto" follows the desktop's colour scheme and falls back to dark, the NOC's
default, when the desktop says none.

Views that paint with their own colours read `current()` when they are built;
`console/views/window/looks.py` switches the theme at run time and repaints them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

from console.qt import status_inks
from console.qt.status_inks import Ink
from console.settings import THEME_CHOICES as CHOICES

STYLES: Final = Path(__file__).resolve().parents[3] / "resources" / "styles"


class ThemeError(ValueError):
    pass


@dataclass(frozen=True)
class Theme:
    """One theme's colours (#rrggbb). `window`/`text` are the body text pair."""

    name: str
    window: str  # the window's background
    text: str  # body text on it
    base: str  # tables, lists, inputs
    button: str
    highlight: str  # the selected row
    highlighted_text: str
    disabled_text: str
    tooltip: str
    tooltip_text: str
    link: str
    plot_background: str
    plot_foreground: str  # axes, tick labels, titles
    alternate_base: str  # every other row of a table (the stylesheet's)
    # Status words, drawn on the window, a table's rows and its alternate rows
    # (console/qt/status_inks.py: severities, workload, silence and health states).
    critical: str
    warning: str
    info: str
    good: str
    muted: str
    attention: str

    def stylesheet(self) -> str:
        return (STYLES / f"{self.name}.qss").read_text(encoding="utf-8")

    def color_pairs(self) -> dict[str, tuple[str, str]]:
        """(text, background) of every pair the palette, the plots and the status words
        (on the window, the rows and every other row) show text in."""
        return {
            "window text": (self.text, self.window),
            "base text": (self.text, self.base),
            "button text": (self.text, self.button),
            "selected text": (self.highlighted_text, self.highlight),
            "tooltip": (self.tooltip_text, self.tooltip),
            "link": (self.link, self.base),
            "plot labels": (self.plot_foreground, self.plot_background),
            **{
                f"{ink.value} on {where}": (colour, background)
                for ink, colour in self.inks().items()
                for where, background in (
                    ("window", self.window),
                    ("base", self.base),
                    ("alternate rows", self.alternate_base),
                )
            },
        }

    def inks(self) -> dict[Ink, str]:
        """The status words' colours, by ink."""
        return {ink: getattr(self, ink.value) for ink in Ink}


DARK: Final = Theme(
    name="dark",
    window="#1a1d23",
    text="#e2e8f0",
    base="#20242b",
    button="#2d3748",
    highlight="#2b6cb0",
    highlighted_text="#ffffff",
    # Disabled text needs no 4.5:1 (WCAG exempts inactive controls) but must be legible.
    disabled_text="#8a94a6",
    tooltip="#2d3748",
    tooltip_text="#f7fafc",
    link="#90cdf4",
    plot_background="#1a1d23",
    plot_foreground="#cbd5e0",
    alternate_base="#262b33",
    critical="#fc8181",
    warning="#f6c343",
    info="#63b3ed",
    good="#68d391",
    muted="#a0aec0",
    attention="#f687b3",
)
LIGHT: Final = Theme(
    name="light",
    window="#f4f6f8",
    text="#1a202c",
    base="#ffffff",
    button="#e2e8f0",
    highlight="#2b6cb0",
    highlighted_text="#ffffff",
    disabled_text="#6b7280",
    tooltip="#1a202c",
    tooltip_text="#f7fafc",
    link="#2b6cb0",
    plot_background="#ffffff",
    plot_foreground="#2d3748",
    alternate_base="#f1f4f8",
    # The warning's amber was #b7791f (3.4:1 on the window): darker, it reads.
    critical="#c53030",
    warning="#975a16",
    info="#2b6cb0",
    good="#276749",
    muted="#4a5568",
    attention="#b83280",
)
THEMES: Final = {theme.name: theme for theme in (DARK, LIGHT)}

_current: Theme = DARK
status_inks.use(DARK.inks())


def check_choice(choice: str, where: str = "theme") -> str:
    """The `theme` setting's value, or ThemeError naming what it may be."""
    if choice not in CHOICES:
        raise ThemeError(f"{where} must be one of {', '.join(CHOICES)}, not {choice!r}")
    return choice


def resolve(choice: str, desktop_dark: bool | None) -> Theme:
    """The theme for a choice; "auto" is the desktop's scheme (None: it says none)."""
    if check_choice(choice) != "auto":
        return THEMES[choice]
    return LIGHT if desktop_dark is False else DARK


def current() -> Theme:
    """The theme shown now (dark until one is applied)."""
    return _current


def set_current(theme: Theme) -> None:
    global _current
    _current = theme
    status_inks.use(theme.inks())  # the tables' status words follow the theme


def contrast(foreground: str, background: str) -> float:
    """WCAG 2 contrast ratio of two #rrggbb colours (1 to 21)."""
    lighter, darker = sorted((_luminance(foreground), _luminance(background)), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


def _luminance(colour: str) -> float:
    value = colour.lstrip("#")
    if len(value) != 6:
        raise ThemeError(f"not a #rrggbb colour: {colour!r}")
    channels = [int(value[i : i + 2], 16) / 255 for i in (0, 2, 4)]
    r, g, b = (c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b
