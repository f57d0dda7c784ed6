"""What every screenshot script here needs: wait for the console to get somewhere, save what it
shows, and the console over demo daemons in use or over hand-fed frames.

The scripts run as `python docs/screenshots/NAME.py`, so this folder is on
sys.path and they import this module by its bare name.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import grpc
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication, QWidget

from console.app import build_window, has_display, qt_application
from console.demo_fleet import DemoFleet
from console.fleet.updates import LinkState
from console.main_window import MainWindow
from console.session import ConsoleSession
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc

HOUR_MS = 3_600_000
Started = list[tuple[pb_grpc.NodeServiceStub, str]]
"""The workloads a script submitted, with the stub of their node: cancelled before the end."""


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
    print(f"wrote {path} ({image.width()}x{image.height()})", flush=True)


def save_grab(widget: QWidget, path: Path) -> None:
    """Save what `widget` shows (its grab, children included) as `path`."""
    save_image(widget.grab().toImage(), path)


def reserve_in_use(first: pb_grpc.NodeServiceStub, second: pb_grpc.NodeServiceStub) -> None:
    """The reservations of a fleet in use: bob's two GPUs, a team's four, two short ones."""
    now = int(time.time() * 1000)
    for stub, gpus, holder, why, hours in (
        (first, [1, 2], "bob", "benchmark run", 5),
        (first, [7], "carol", "profiling", 1.5),
        (second, [0, 1, 2, 3], "team:ml", "llama-8b sweep", 26),
        (second, [6], "alice", "notebook", 0.4),
    ):
        stub.Reserve(pb.ReserveRequest(gpu_indices=gpus, holder=holder, reason=why,
                                       until_unix_ms=now + int(hours * HOUR_MS), actor="ada"),
                     timeout=5)  # fmt: skip


def shoot_in_use(
    stage: Callable[[list[pb_grpc.NodeServiceStub]], Started],
    shoot: Callable[[QApplication, MainWindow, list[str]], None],
    people: Sequence[str],
    size: tuple[int, int] = (1366, 768),
) -> int:
    """Two demo daemons, the console on them at `size`; `stage` them, then `shoot` the window.

    Every workload `stage` started is cancelled, and seen ended, before the daemons stop:
    workloads outlive their daemon (as Slurm jobs do).
    """
    app = qt_application(offscreen=True)
    with DemoFleet(nodes=2, gpus=8) as demo:
        targets = demo.start()
        channels = [grpc.insecure_channel(t) for t in targets]
        stubs = [pb_grpc.NodeServiceStub(c) for c in channels]
        window = build_window(targets, people)
        window.resize(*size)
        window.show()
        fleet = window.session.fleet
        wait_until(app, lambda: all(n.state is LinkState.CONNECTED and len(n.latest) == 8
                                    for n in fleet))  # fmt: skip
        started = stage(stubs)
        try:
            shoot(app, window, targets)
        finally:
            for stub, workload_id in started:
                stub.CancelWorkload(pb.CancelWorkloadRequest(workload_id=workload_id), timeout=5)
            wait_until(app, lambda: all(w.state.ended for w in fleet.control.workloads()), 30)
            window.session.stop()
            for channel in channels:
                channel.close()
    return 0


@contextmanager
def offline_window(
    targets: list[str], size: tuple[int, int]
) -> Iterator[tuple[QApplication, MainWindow]]:
    """The real MainWindow at `size` over a session connected to nothing: frames come by hand.

    Offscreen where there is no display, so the scripts run under xvfb-run or without. The
    window closes and the session stops when the block ends.
    """
    app = qt_application(offscreen=not has_display())
    session = ConsoleSession(targets)
    session.connections.start()  # the network thread, connected to nothing: no daemon here
    window = MainWindow(session)
    window.resize(*size)
    window.show()
    try:
        yield app, window
    finally:
        window.close()
        session.stop()
