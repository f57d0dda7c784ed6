"""Render the GPU detail's readings and the Reservations panel for docs/console.md, offscreen,
against demo daemons.

    PYTHONPATH=. .venv/bin/python docs/screenshots/details_screenshots.py [OUT_DIR]

The demo's four nodes (console/demo_fleet.py, as `gpufleet demo` seeds them): bob
runs eval-sweep on gpu-node-01 GPU 4; team:ml, bob and carol hold reservations.
Writes details-readings.png (1366x768) and details-readings-4k.png (3840x2160):
GPU 4's current readings and the process table's nvitop columns;
reservations-panel.png (the Reservations tab), reservations-release.png
(releasing one GPU of carol's two on gpu-node-04: the question) and
reservations-undo.png (the Undo bar after it).
"""

from __future__ import annotations

import sys
import time

from control_screenshots import PEOPLE, save, save_dialog, settle
from PySide6.QtWidgets import QApplication, QMessageBox
from shot_tools import Started, TokenStub, shoot_in_use, wait_until

from console.main_window import MainWindow


def stage(_stubs: list[TokenStub]) -> Started:
    """Nothing more than the demo's own: its workloads and reservations."""
    return []


def main() -> int:
    return shoot_in_use(stage, shoot, PEOPLE)


def shoot(app: QApplication, window: MainWindow, targets: list[str]) -> None:
    fleet, first, fourth = window.session.fleet, targets[0], targets[3]
    # The demo's three reservations and bob's eval-sweep on gpu-node-01 GPU 4.
    wait_until(app, lambda: len(fleet.control.reservations()) == 3
               and fleet.control.running_on(first, 4) is not None)  # fmt: skip
    window.grid.select(first, 4)
    table = window.detail.processes
    wait_until(app, lambda: table.rowCount() > 0 and table.process(0).cpu_pct is not None, 30)
    settle(app, 3)  # a few samples: the SM and CPU shares have an interval to span
    save(window.grab().toImage(), "details-readings.png")
    window.resize(3840, 2160)
    settle(app, 1.5)
    save(window.grab().toImage(), "details-readings-4k.png")
    window.resize(1366, 768)
    panel = window.control.reservations_panel
    window.tabs.setCurrentWidget(panel)
    settle(app, 1)
    save(window.grab().toImage(), "reservations-panel.png")
    carol = next(r for r in fleet.control.reservations() if r.holder == "carol")
    assert panel.select(carol.target, carol.id)
    panel.row_menu(carol).actions()[2].trigger()  # "Release only GPU 1…"
    box = window.control.release_prompts.dialog
    assert isinstance(box, QMessageBox)
    save_dialog(app, window, box, "reservations-release.png")
    box.accept()
    wait_until(app, panel.undo.isVisible, 10)
    settle(app, 0.3)
    save(window.grab().toImage(), "reservations-undo.png")
    window.control.release_prompts.undo_release()  # the fleet as it was
    wait_until(app, lambda: fleet.control.reservation_on(fourth, 1, int(time.time() * 1000))
               is not None, 10)  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
