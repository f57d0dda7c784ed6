"""Render the GPU detail's readings and the Reservations panel for docs/console.md, offscreen,
against demo daemons.

    PYTHONPATH=. .venv/bin/python docs/screenshots/details_screenshots.py [OUT_DIR]

(As root: the workloads run as their owners, the tests' local accounts.)

Two simulated GPU servers in use: bob holds GPUs 1 and 2 of gpu-node-01 and runs
train-resnet on GPU 1; carol and team:ml hold others. Writes details-readings.png
(1366x768) and details-readings-4k.png (3840x2160): GPU 1's current readings, its
holder and the process table's nvitop columns; reservations-panel.png (the
Reservations tab), reservations-release.png (releasing one GPU of bob's two: the
question) and reservations-undo.png (the Undo bar after it). Every workload it
started is cancelled before the daemons stop.
"""

from __future__ import annotations

import sys
import time

from control_screenshots import PEOPLE, save, save_dialog, settle
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QDockWidget, QMessageBox
from shot_tools import Started, reserve_in_use, shoot_in_use, wait_until

from console.main_window import MainWindow
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from tests.accounts import TEST_ACCOUNTS, local_accounts


def stage(stubs: list[pb_grpc.NodeServiceStub]) -> Started:
    """Reservations across both nodes and one workload on a reserved GPU."""
    first, second = stubs
    reserve_in_use(first, second)
    request = pb.SubmitWorkloadRequest(name="train-resnet", argv=["sleep", "600"], owner="bob",
                                       gpu_count=1, actor="bob")  # fmt: skip
    workload = first.SubmitWorkload(request, timeout=5).id
    first.AssignWorkload(pb.AssignWorkloadRequest(workload_id=workload, gpu_indices=[1],
                                                  actor="bob"), timeout=5)  # fmt: skip
    return [(first, workload)]


def main() -> int:
    with local_accounts(TEST_ACCOUNTS):
        return shoot_in_use(stage, shoot, PEOPLE)


def shoot(app: QApplication, window: MainWindow, targets: list[str]) -> None:
    fleet, first = window.session.fleet, targets[0]
    wait_until(app, lambda: len(fleet.control.reservations()) == 4
               and fleet.control.running_on(first, 1) is not None)  # fmt: skip
    window.grid.select(first, 1)
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
    dock = window.findChild(QDockWidget, "alertDock")
    assert dock is not None
    window.resizeDocks([dock], [300], Qt.Orientation.Vertical)  # every row in sight
    settle(app, 1)
    save(window.grab().toImage(), "reservations-panel.png")
    bob = next(r for r in fleet.control.reservations() if r.holder == "bob")
    assert panel.select(bob.target, bob.id)
    panel.row_menu(bob).actions()[2].trigger()  # "Release only GPU 2…"
    box = window.control.release_prompts.dialog
    assert isinstance(box, QMessageBox)
    save_dialog(app, window, box, "reservations-release.png")
    box.accept()
    wait_until(app, panel.undo.isVisible, 10)
    settle(app, 0.3)
    save(window.grab().toImage(), "reservations-undo.png")
    window.control.release_prompts.undo_release()  # the fleet as it was
    wait_until(app, lambda: fleet.control.reservation_on(first, 2, int(time.time() * 1000))
               is not None, 10)  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
