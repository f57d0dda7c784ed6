"""Benchmark: the console window's GUI-thread CPU per frame, fed by hand (no daemons).

    python bench/console_frames.py [--nodes 125] [--frames 800] [--out FILE.json]
    python bench/console_frames.py --smoke      # 8 nodes, 60 frames (~10 s)

The real MainWindow (as `gpufleet console` builds it: WindowLooks, dark theme),
offscreen at 1920x1080, one GPU selected so its plots update. Its inbox is fed
as the network thread would: every node's inventory, 1,100 s of history, then
each node one sample a second, spread over the frames (20 a second), so every
frame applies about 1/20 of the fleet and every 20th refreshes the plots. A
frame is the pump and everything the GUI thread does until the next pump is
due (50 ms later); its cost is the GUI thread's CPU time (time.thread_time), so
other load on the machine moves it less than the wall-clock frame time of
bench/console_fleet.py. Compare two trees as a ratio in one sitting (run the
script from each). See bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from machine import code_version, describe_machine
from PySide6.QtCore import QEventLoop
from PySide6.QtWidgets import QApplication
from results import stats_ms

from console.app import qt_application
from console.main_window import MainWindow
from console.qt.frame_pump import DEFAULT_FPS
from console.session import ConsoleSession
from console.views.window.window_looks import WindowLooks
from gpufleet.v1.gpu_metrics import (
    MEM_TOTAL_BYTES,
    MEM_USED_BYTES,
    POWER_W,
    TEMP_GPU_C,
    UTIL_GPU_PCT,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the hand-fed updates: the tests'
from tests.console.hand_fed import gpus_of, node_up, samples, simulated_node

GPUS = 8
HISTORY_S = 1100  # more than the ring (1,024): the plots show a full ring
WARMUP_FRAMES = 40  # the first frames after the history lay the window out
REPO_ROOT = Path(__file__).resolve().parents[1]
SMOKE = {"nodes": 8, "frames": 60}


class HandFedFleet:
    """The window's inbox fed as the network thread would feed it."""

    def __init__(self, session: ConsoleSession, nodes: int, seed: int = 0) -> None:
        self._inbox = session.inbox
        self.targets = self.targets_of(nodes)
        self._rng = np.random.default_rng(seed)
        self._temps = self._rng.uniform(35, 80, (nodes, GPUS))
        self._t0 = time.time() - HISTORY_S - 60
        for n, target in enumerate(self.targets):
            gpus = gpus_of(GPUS, f"GPU-{n:03d}-", model="NVIDIA H100")
            for update in node_up(target, simulated_node(f"gpu-node-{n:03d}", gpus)):
                self._inbox.put(update)

    @staticmethod
    def targets_of(nodes: int) -> list[str]:
        """The addresses the hand-fed nodes go by (nothing listens there)."""
        return [f"127.0.0.1:{41000 + n}" for n in range(nodes)]

    def send(self, node: int, second: int) -> None:
        rng = self._rng
        self._temps[node] += rng.normal(0, 1.0, GPUS)
        readings = {
            TEMP_GPU_C: self._temps[node],
            UTIL_GPU_PCT: rng.uniform(0, 100, GPUS),
            MEM_USED_BYTES: 40,
            MEM_TOTAL_BYTES: 80,
            POWER_W: rng.uniform(100, 700, GPUS),
        }
        self._inbox.put(samples(self.targets[node], self._t0 + second, GPUS, readings))


def frame(app: QApplication, session: ConsoleSession) -> None:
    """One pump, then the GUI thread's events until the next pump is due."""
    due = time.perf_counter() + 1 / DEFAULT_FPS
    session.pump.pump()
    while time.perf_counter() < due:
        app.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 5)
        time.sleep(0.001)  # idle until the next frame, as the event loop would


def hand_fed_window(nodes: int) -> tuple[QApplication, ConsoleSession, MainWindow, HandFedFleet]:
    """The real window as `gpufleet console` builds it, offscreen at 1920x1080, fed by hand."""
    os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="gpufleet-bench-")  # no layout
    app = qt_application(offscreen=True)
    session = ConsoleSession(HandFedFleet.targets_of(nodes))
    session.connections.start()  # queries go nowhere; no node is connected to
    window = MainWindow(session)
    WindowLooks(window, theme="dark")
    window.resize(1920, 1080)
    window.show()
    return app, session, window, HandFedFleet(session, nodes)


def hand_fed_args(
    argv: Sequence[str] | None, doc: str, count: str, default: int, smoke: dict[str, int]
) -> argparse.Namespace:
    """--nodes, --COUNT (how many frames, changes…), --out and --smoke, checked."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=125, help="nodes of 8 GPUs (default 125)")
    parser.add_argument(f"--{count}", type=int, default=default,
                        help=f"measured {count} (default {default})")  # fmt: skip
    parser.add_argument("--out", type=Path, metavar="FILE.json", help="the result as JSON")
    parser.add_argument("--smoke", action="store_true",
                        help=", ".join(f"{v} {k}" for k, v in smoke.items()))  # fmt: skip
    args = parser.parse_args(argv)
    if args.smoke:
        vars(args).update(smoke)
    if args.nodes < 1 or getattr(args, count) < 1:
        parser.error(f"--nodes and --{count} must be at least 1")
    return args


def run(nodes: int, frames: int) -> dict[str, object]:
    app, session, window, fleet = hand_fed_window(nodes)
    for second in range(HISTORY_S):
        for node in range(nodes):
            fleet.send(node, second)
        if second % 100 == 0:
            frame(app, session)
    window.grid.select(fleet.targets[0], 0)
    plot_frames: list[float] = []
    other_frames: list[float] = []
    second = HISTORY_S
    per_second = DEFAULT_FPS
    for f in range(WARMUP_FRAMES + frames):
        slot = f % per_second
        if slot == 0:
            second += 1
        for node in range(slot, nodes, per_second):  # node 0 (selected) in slot 0
            fleet.send(node, second)
        began = time.thread_time()
        frame(app, session)
        spent = time.thread_time() - began
        if f >= WARMUP_FRAMES:
            (plot_frames if slot == 0 else other_frames).append(spent)
    session.stop()
    window.close()
    return {
        "nodes": nodes,
        "gpus": nodes * GPUS,
        "frames": frames,
        "gui_cpu_ms": {
            "frame": stats_ms(plot_frames + other_frames),
            "plot_frame": stats_ms(plot_frames),
            "other_frame": stats_ms(other_frames),
        },
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = hand_fed_args(argv, __doc__, "frames", 800, SMOKE)
    result = run(args.nodes, args.frames)
    result.update(machine=describe_machine(), code=code_version(REPO_ROOT))
    cpu = result["gui_cpu_ms"]
    assert isinstance(cpu, dict)
    print(f"console_frames: {args.nodes} nodes x {GPUS} GPUs, {args.frames} frames, "
          "GUI-thread CPU per frame (ms)")  # fmt: skip
    print(f"  {'':24} {'p50':>8} {'p99':>8} {'max':>8} {'n':>6}")
    for name, label in (("frame", "all frames"), ("plot_frame", "frames with plot refresh"),
                        ("other_frame", "other frames")):  # fmt: skip
        s = cpu[name]
        print(f"  {label:24} {s['p50']:8.1f} {s['p99']:8.1f} {s['max']:8.1f} {s['count']:6d}")
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
