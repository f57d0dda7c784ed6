"""Render docs/screenshots/replay.png: incident replay's banner and time cursor (#30), at
1366x768.

    PYTHONPATH=. .venv/bin/python docs/screenshots/replay_screenshot.py [OUT_DIR]

(Needs Xvfb, openbox and xdotool: installer/dev-setup.sh test.) The demo's four nodes as
`gpufleet demo` starts them (console/demo_fleet.py: a seeded day of history each) and
the console on them with the demo's token. Once the incident on gpu-node-02 has raised
its first critical alert, the timeline (Ctrl+T, its window 1 h) steps back to that
alert's raise (Page Up), as a person would: the banner, the strip with its alert marks
and the grid, the alert list and the detail (the hot GPU's, its plots around the
moment, marked) as the nodes recorded them then.
"""

from __future__ import annotations

import sys
from pathlib import Path

OUT = Path(sys.argv[1]) if len(sys.argv) > 1 and not sys.argv[1].startswith("--") else (
    Path(__file__).resolve().parent
)  # fmt: skip
SIZE = (1366, 768)


def shoot() -> None:
    """In the X server of this process's DISPLAY."""
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest
    from shot_tools import demo_at_its_first_critical, save_grab, settle, wait_until

    from console.app import qt_application
    from gpufleet.v1.alert_severity import Severity

    app = qt_application()
    with demo_at_its_first_critical(app) as (_demo, window):
        fleet = window.session.fleet
        window.alerts.toast.hide()
        part = window.replay
        # The hot GPU in the detail: its plots follow the cursor back, the moment marked.
        hot = next(a for a in fleet.live_alerts.alerts() if a.severity is Severity.CRITICAL)
        window.detail.show_gpu(hot.target, hot.gpu_index or 0)
        part.strip.window_box.setCurrentText("1 h")
        QTest.keyClick(window, Qt.Key.Key_T, Qt.KeyboardModifier.ControlModifier)
        wait_until(app, part.strip.bar.hasFocus, 10)
        QTest.keyClick(part.strip.bar, Qt.Key.Key_PageUp)  # the newest alert's raise
        wanted = part.source.at_ms
        wait_until(app, lambda: all(n.moment is not None and n.moment.answered
                                    and n.moment.at_ms == wanted for n in fleet), 30)  # fmt: skip
        settle(app, 1)
        save_grab(window, OUT / "replay.png")


def main() -> int:
    from shot_tools import run_script

    return run_script(__file__, OUT, shoot, SIZE)


if __name__ == "__main__":
    sys.exit(main())
