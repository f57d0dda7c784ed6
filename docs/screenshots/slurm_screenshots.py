"""Render the screenshots of docs/control.md's "Running with Slurm", against a real Slurm.

    sudo .venv/bin/python docs/screenshots/slurm_screenshots.py [OUT_DIR]

Starts the test suite's Slurm (tests/slurm/harness.py: munged, slurmctld, a
slurmd per node and slurmrestd on loopback; it needs root and Debian's Slurm
packages, as `make test` installs them) with nodes gpu-node-01 and gpu-node-02,
two simulated GPU servers of those names, and a console whose profile points at
the slurmrestd. Queues a few Slurm jobs, then writes slurm-workloads.png (the
Workloads tab: gpufleet's queue over Slurm's, the reservations, the drain
zone), slurm-drain-zone.png (a node dragged over the drain zone) and
slurm-reserve.png (a person dropped on a Slurm node: the reservation dialog).
Nothing is left in Slurm: the jobs are cancelled and the cluster stopped.
"""

from __future__ import annotations

import sys
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QDragEnterEvent, QDragMoveEvent, QDropEvent, QImage
from PySide6.QtWidgets import QApplication, QDockWidget
from shot_tools import demo_window, save_image, settle, wait_until

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # for tests.slurm.harness

from console.app import qt_application
from console.demo_fleet import DemoFleet
from console.fleet.updates import LinkState
from console.main_window import MainWindow
from console.qt.mime import holder_mime
from console.settings import SlurmProfile
from tests.slurm.harness import missing_pieces, slurm_cluster

OUT = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent
NODES = ("gpu-node-01", "gpu-node-02")
JOBS = (  # (name, GPUs, held until): pending jobs of the cluster's queue
    ("train-llama-70b", 8, "now+2hours"),
    ("eval-nightly", 2, "now+1hour"),
    ("sweep-lr-0.3", 1, "now+30minutes"),
)


def save(image: QImage, name: str) -> None:
    save_image(image, OUT / name)


def shoot(app: QApplication, window: MainWindow, targets: list[str]) -> None:
    parts = window.slurm
    assert parts is not None
    window.tabs.setCurrentIndex(window.tabs.indexOf(parts.panel.parentWidget()))  # type: ignore[arg-type]
    wait_until(app, lambda: len(parts.watch.view.queue()) >= len(JOBS), 30)
    window.grid.select(targets[0], 0)
    dock = window.findChild(QDockWidget, "alertDock")
    assert dock is not None
    window.resizeDocks([dock], [560], Qt.Orientation.Vertical)  # room for the Slurm queue
    settle(app, 1.5)
    save(window.grab().toImage(), "slurm-workloads.png")
    # A node dragged by its title line over the drain zone: the zone's verdict.
    zone = parts.panel.drain_zone
    mime = window.grid.node_drag_data(targets[1])
    buttons, keys = Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier
    move = Qt.DropAction.MoveAction
    at = zone.rect().center()
    zone.dragEnterEvent(QDragEnterEvent(at, move, mime, buttons, keys))
    zone.dragMoveEvent(QDragMoveEvent(at, move, mime, buttons, keys))
    settle(app, 0.3)
    save(window.grab().toImage(), "slurm-drain-zone.png")
    zone.dragLeaveEvent(None)  # type: ignore[arg-type]
    # A person dropped on a Slurm node's tile: the reservation dialog.
    grid = window.grid
    tile = grid.tile_rect(targets[0], 2)
    assert tile is not None
    data = holder_mime("alice")
    grid.dragEnterEvent(QDragEnterEvent(tile.center(), move, data, buttons, keys))
    grid.dragMoveEvent(QDragMoveEvent(tile.center(), move, data, buttons, keys))
    grid.dropEvent(QDropEvent(tile.center().toPointF(), move, data, buttons, keys))
    dialog = parts.prompts.dialog
    assert dialog is not None
    settle(app, 0.5)
    save(dialog.grab().toImage(), "slurm-reserve.png")
    dialog.reject()


def main() -> int:
    why = missing_pieces()
    if why is not None:
        print(f"cannot start the real Slurm: {why}", file=sys.stderr)
        return 2
    OUT.mkdir(parents=True, exist_ok=True)
    app = qt_application(offscreen=True)
    with slurm_cluster(NODES) as slurm, DemoFleet(nodes=2, gpus=8) as demo:
        targets = demo.start()
        jobs = [slurm.run("sbatch", "--parsable", f"--begin={begin}", f"--job-name={name}",
                          f"--gres=gpu:{gpus}", "--wrap", "sleep 600").strip()
                for name, gpus, begin in JOBS]  # fmt: skip
        profile = SlurmProfile(slurm.rest_url, "root", conf=slurm.layout.conf)
        # The demo's token, as `gpufleet demo` gives it (console/cli.py).
        window = demo_window(demo, ["alice", "bob", "team:ml"], theme="dark",
                             slurm=(profile, lambda: slurm.token("root")))  # fmt: skip
        window.resize(1600, 1000)
        window.show()
        fleet = window.session.fleet
        wait_until(app, lambda: all(n.state is LinkState.CONNECTED and len(n.latest) == 8
                                    for n in fleet))  # fmt: skip
        try:
            shoot(app, window, targets)
        finally:
            for job in jobs:
                slurm.run("scancel", job)
            window.session.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
