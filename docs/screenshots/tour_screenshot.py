"""Render docs/screenshots/tour.png (the guided tour's step on the alert list) and alerts.png
(the demo's first critical alerts and their popup), at 1366x768.

    PYTHONPATH=. .venv/bin/python docs/screenshots/tour_screenshot.py [OUT_DIR]

(Needs Xvfb, openbox and xdotool: installer/dev-setup.sh test.) A fresh Xvfb of
1366x768 with openbox on it, the demo's four nodes as `gpufleet demo` starts them
(console/demo_fleet.py) and the console on them as a person's first start shows it:
maximised, a fresh config directory (so the tour has not been seen), gpu-node-02
GPU 2 open as the demo opens it. Once the incident on gpu-node-02 has raised its
first critical alert (GPU 2 overheating) it saves alerts.png, its popup shown;
then the tour starts as console/app.py starts it (HelpMenu.first_start) and goes
on by its keys (Right) to its third step, the alert list.
"""

from __future__ import annotations

import sys
from pathlib import Path

OUT = Path(sys.argv[1]) if len(sys.argv) > 1 and not sys.argv[1].startswith("--") else (
    Path(__file__).resolve().parent
)  # fmt: skip
SIZE = (1366, 768)
ALERTS_STEP = "alerts"


def shoot() -> None:
    """In the X server of this process's DISPLAY."""
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest
    from shot_tools import demo_at_its_first_critical, save_grab, settle

    from console.app import qt_application

    app = qt_application()
    with demo_at_its_first_critical(app) as (_demo, window):
        settle(app, 2)
        save_grab(window, OUT / "alerts.png")
        assert window.help_menu.first_start(), "the tour was seen already"
        tour = window.help_menu.tour
        while tour.steps[tour.index].target != ALERTS_STEP:
            QTest.keyClick(tour, Qt.Key.Key_Right)
        settle(app, 1)
        save_grab(window, OUT / "tour.png")
        QTest.keyClick(tour, Qt.Key.Key_Escape)


def main() -> int:
    from shot_tools import run_script

    return run_script(__file__, OUT, shoot, SIZE)


if __name__ == "__main__":
    sys.exit(main())
