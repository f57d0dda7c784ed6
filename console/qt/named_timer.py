"""named_timer: every timer of the console is made here, with its name.

A named timer tells you where in a traceback or a profile (the style guide:
"Name every timer and thread"); made with its parent, it dies with it.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer


def named_timer(
    parent: QObject,
    name: str,
    slot: Callable[[], object],
    interval_ms: int | None = None,
    single_shot: bool = False,
) -> QTimer:
    """A stopped QTimer owned by `parent`, named `name`, calling `slot` on each timeout."""
    timer = QTimer(parent)
    timer.setObjectName(name)
    timer.setSingleShot(single_shot)
    if interval_ms is not None:
        timer.setInterval(interval_ms)
    timer.timeout.connect(slot)
    return timer
