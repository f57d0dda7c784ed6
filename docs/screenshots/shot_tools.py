"""What every screenshot script here needs: wait for the console to get somewhere, save what it
shows, and the console over the demo's daemons (`gpufleet demo`'s fleet: a day of history,
its users' workloads and reservations, the incident on gpu-node-02) or over hand-fed frames.

The scripts run as `python docs/screenshots/NAME.py`, so this folder is on
sys.path and they import this module by its bare name.

Importing it points the console's config directory (XDG_CONFIG_HOME) at a fresh
temporary one, unless GPUFLEET_SHOTS_CONFIG names one: no remembered layout, no
seen guided tour, no profile of the person running it in the pictures, and
nothing of theirs overwritten.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication, QWidget

from console.app import build_window, has_display, qt_application
from console.connections.decode import decode_batch
from console.connections.security import LinkSecurity
from console.demo_fleet import DemoFleet
from console.demo_seed import DEMO_PEOPLE
from console.fleet.model import FleetModel
from console.fleet.updates import LinkState
from console.main_window import MainWindow
from console.session import ConsoleSession
from console.views.window.window_looks import WindowLooks
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc


def _fresh_config() -> None:
    if os.environ.get("GPUFLEET_SHOTS_CONFIG"):
        os.environ["XDG_CONFIG_HOME"] = os.environ["GPUFLEET_SHOTS_CONFIG"]
        return
    path = tempfile.mkdtemp(prefix="gpufleet-shots-config-")
    os.environ["XDG_CONFIG_HOME"] = path
    atexit.register(shutil.rmtree, path, ignore_errors=True)


_fresh_config()


class TokenStub:
    """A node's NodeServiceStub whose every call carries the demo's token (as
    `gpufleet demo`'s own seeding does through gpufleet.client)."""

    def __init__(self, channel: grpc.Channel, token: str) -> None:
        self._stub = pb_grpc.NodeServiceStub(channel)
        self._metadata = (("authorization", f"Bearer {token}"),)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._stub, name)

        def call(request: object, **kwargs: object) -> Any:
            return method(request, metadata=self._metadata, **kwargs)

        return call


Started = list[tuple[TokenStub, str]]
"""The workloads a script submitted, with the stub of their node: cancelled before the end."""


def demo_window(
    demo: DemoFleet, people: Sequence[str] = DEMO_PEOPLE, **options: object
) -> MainWindow:
    """The console on the demo's nodes, as `gpufleet demo` opens it (console/cli.py): the
    demo's token, its people."""
    return build_window(demo.targets, people, security=LinkSecurity(token=demo.token),
                        **options)  # type: ignore[arg-type]  # fmt: skip


@contextmanager
def demo_first_start() -> Iterator[tuple[QApplication, DemoFleet, MainWindow, WindowLooks]]:
    """`gpufleet demo`'s four nodes and the console on them, dark, shown as a first start
    lays it out (this config is fresh), and its looks (theme, wall mode) to change."""
    app = qt_application()
    with DemoFleet(nodes=4, gpus=8) as demo:
        demo.start()
        window = demo_window(demo, theme="dark")
        looks = window.findChild(WindowLooks)
        assert isinstance(looks, WindowLooks)
        window.show()
        yield app, demo, window, looks


def feed_samples(
    fleet: FleetModel, targets: Sequence[str], sample: Callable[[int, int, int], pb.GpuSample],
    ticks: int, now_ms: int, gpus: int = 8,
) -> None:  # fmt: skip
    """`ticks` seconds of batches up to `now_ms`, decoded as the network thread does:
    `sample(n, gpu, tick)` is GPU `gpu` of the n-th of `targets` at that tick."""
    for tick in range(ticks):
        stamp = now_ms - (ticks - tick) * 1000
        for n, target in enumerate(targets):
            batch = pb.SampleBatch(timestamp_unix_ms=stamp,
                                   gpus=[sample(n, g, tick) for g in range(gpus)])  # fmt: skip
            fleet.apply(decode_batch(target, batch, gpus))


def demo_stubs(demo: DemoFleet) -> tuple[list[TokenStub], list[grpc.Channel]]:
    """A stub per demo node, with the demo's token; close the channels after."""
    channels = [grpc.insecure_channel(t) for t in demo.targets]
    return [TokenStub(c, demo.token) for c in channels], channels


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


def shoot_in_use(
    stage: Callable[[list[TokenStub]], Started],
    shoot: Callable[[QApplication, MainWindow, list[str]], None],
    people: Sequence[str],
    size: tuple[int, int] = (1366, 768),
    nodes: int = 4,
) -> int:
    """The demo's daemons (seeded as `gpufleet demo` seeds them), the console on them at
    `size`; `stage` more on them, then `shoot` the window.

    Every workload `stage` started is cancelled, and seen ended, before the daemons stop
    (the demo's own end with them).
    """
    app = qt_application(offscreen=True)
    with DemoFleet(nodes=nodes, gpus=8) as demo:
        targets = demo.start()
        stubs, channels = demo_stubs(demo)
        window = demo_window(demo, people)
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
            ours = {w for _stub, w in started}
            wait_until(app, lambda: all(w.state.ended for w in fleet.control.workloads()
                                        if w.id in ours), 30)  # fmt: skip
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


# -- a real X server of the screen's size ---------------------------------------------


def start_x(width: int, height: int) -> tuple[subprocess.Popen[str], subprocess.Popen[str], str]:
    xvfb = subprocess.Popen(
        ["Xvfb", "-displayfd", "1", "-nolisten", "tcp", "-screen", "0", f"{width}x{height}x24"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert xvfb.stdout is not None
    display = ":" + xvfb.stdout.readline().strip()
    env = {**os.environ, "DISPLAY": display}
    wm = subprocess.Popen(["openbox", "--sm-disable"], env=env, stderr=subprocess.DEVNULL,
                          text=True)  # fmt: skip
    deadline = time.monotonic() + 15
    while subprocess.run(["xdotool", "get_desktop"], env=env, capture_output=True).returncode:
        if time.monotonic() > deadline:
            raise RuntimeError("openbox did not start")
        time.sleep(0.1)
    return xvfb, wm, display


def in_x_server(
    width: int, height: int, runs: Sequence[Sequence[str]], timeout_s: float = 400
) -> None:
    """Each argv of `runs` in turn, in a fresh Xvfb of `width` x `height` with openbox,
    through Qt's xcb platform (the scripts' children, as a person's desktop shows them)."""
    xvfb, wm, display = start_x(width, height)
    try:
        env = {**os.environ, "DISPLAY": display, "QT_QPA_PLATFORM": "xcb"}
        for argv in runs:
            subprocess.run(list(argv), env=env, check=True, timeout=timeout_s)
    finally:
        for process in (wm, xvfb):
            process.terminate()
            process.wait(timeout=10)


@contextmanager
def demo_at_its_first_critical(app: QApplication) -> Iterator[tuple[DemoFleet, MainWindow]]:
    """The demo's four nodes and the console on them, gpu-node-02's GPU 2 open (as
    `gpufleet demo` opens) and its first critical popup shown; ended after the block."""
    with DemoFleet(nodes=4, gpus=8) as demo:
        demo.start()
        window = demo_window(demo)
        window.show()
        fleet = window.session.fleet
        wait_until(app, lambda: all(n.state is LinkState.CONNECTED and len(n.latest) == 8
                                    for n in fleet), 60)  # fmt: skip
        window.grid.select(demo.targets[1], 2)
        # GPU 2 critical: its popup over the grid (a warning has none).
        wait_until(app, window.alerts.toast.isVisible, 150)
        try:
            yield demo, window
        finally:
            window.close()
            window.session.stop()


def run_script(script: str, out: Path, shoot: Callable[[], None], size: tuple[int, int]) -> int:
    """A screenshot script's main: `shoot` in the X server it starts for itself (`--screen`
    names that run), else a fresh Xvfb of `size` with openbox for it."""
    if "--screen" in sys.argv:
        shoot()
        return 0
    out.mkdir(parents=True, exist_ok=True)
    in_x_server(*size, [[sys.executable, script, str(out), "--screen"]], 300)
    return 0
