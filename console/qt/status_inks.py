"""The colours of status words in the tables (an alert's severity, a workload's and a
silence's state, a GPU's health): the shown theme's, each readable (4.5:1, WCAG 2) on
the rows and the window it is drawn on.

The theme (console/views/common/theme.py) sets them when it is applied, so a switch
recolours the words with everything else. A model asks `colour(ink)` when a row is
painted; with no theme applied (a model used without a window) a word has no colour of
its own, the text's.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from PySide6.QtGui import QColor


class Ink(enum.Enum):
    CRITICAL = "critical"  # red: a critical alert, a failed workload
    WARNING = "warning"  # amber: a warning, a timed-out workload, a degraded GPU
    INFO = "info"  # blue: information, a queued workload, a pending silence
    GOOD = "good"  # green: running, active, healthy
    MUTED = "muted"  # grey: cancelled, expired, a note
    ATTENTION = "attention"  # magenta: a GPU that needs a reset, reboot or inspection


_colours: dict[Ink, QColor] = {}


def use(colours: Mapping[Ink, str]) -> None:
    """The shown theme's colours (#rrggbb), one per ink."""
    _colours.clear()
    _colours.update({ink: QColor(value) for ink, value in colours.items()})


def colour(ink: Ink | None) -> QColor | None:
    """The ink's colour in the shown theme; None with no ink, or no theme applied yet."""
    return None if ink is None else _colours.get(ink)
