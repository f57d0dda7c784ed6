"""What every screenshot script here needs: wait for the console to get somewhere.

The scripts run as `python docs/screenshots/NAME.py`, so this folder is on
sys.path and they import this module by its bare name.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication


def wait_until(app: QApplication, predicate: Callable[[], object], timeout_s: float = 60) -> None:
    """Run Qt's event loop until `predicate()` holds; TimeoutError after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout_s} s for {predicate}")
        app.processEvents()
        time.sleep(0.02)


def settle(app: QApplication, seconds: float) -> None:
    """Let the console run for `seconds` (repaints, answers, animations)."""
    end = time.monotonic() + seconds
    wait_until(app, lambda: time.monotonic() > end, seconds + 5)


def save_image(image: QImage, path: Path) -> None:
    if not image.save(str(path)):
        raise OSError(f"could not write {path}")
    print(f"wrote {path}")
