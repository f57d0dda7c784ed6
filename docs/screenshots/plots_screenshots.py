"""Render docs/screenshots/plots-1366.png and plots-detail.png: the GPU plots in time.

    xvfb-run -a .venv/bin/python docs/screenshots/plots_screenshots.py [OUT_DIR]

(Without a display it renders offscreen.) The real MainWindow at 1366x768 over
a ConsoleSession whose samples are built as gpufleet.v1 messages and decoded by
the console's own decoder, as the network thread's are: 15 minutes of two
nodes, GPU 1 of the first heating past its warning line. The detail shows the
range bar, the temperature plot with its warning and critical lines, and the
crosshair where a real mouse move put it, naming every curve's value.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

from PySide6.QtCore import QPointF
from PySide6.QtTest import QTest
from shot_tools import feed_samples, offline_window, wait_until

from console.fleet.model import Change
from console.fleet.updates import GpuInfo, InventoryUpdate, LinkState, LinkUpdate
from console.fleet.updates import NodeInfo as Node
from console.main_window import MainWindow
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1.gpu_metrics import TEMP_GPU_C

OUT = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent
TARGETS = ["10.0.0.1:50051", "10.0.0.2:50051"]
NOW_MS = int(time.time() * 1000)
TICKS = 900  # 15 minutes at 1 s
HOT = (0, 1)  # node, GPU: busy, and heating past 75 °C in the last 5 minutes


def inventory(n: int) -> Node:
    gpus = tuple(GpuInfo(i, f"GPU-{n}-{i}", "NVIDIA H100 80GB HBM3", None,
                         f"0000:{i + 0x18:02x}:00.0", 80 << 30, 700.0)
                 for i in range(8))  # fmt: skip
    return Node(f"gpu-node-0{n + 1}", "550.90.07", "12.4", "0.1", "nvml", True, "", 1.0, gpus)


def sample(n: int, gpu: int, tick: int) -> pb.GpuSample:
    wave = math.sin((tick + 7 * gpu + 13 * n) / 37)
    heat = 18 * max(0.0, (tick - 600) / 300) if (n, gpu) == HOT else 0.0  # the last 5 min
    busy = tick > 120 and (n * 8 + gpu) % 3 != 0
    return pb.GpuSample(
        index=gpu, health=pb.GPU_HEALTH_OK,
        temp_gpu_c=(60 if busy else 38) + 4 * wave + heat,
        util_gpu_pct=max(0.0, (88 if busy else 2) + 9 * wave),
        mem_used_bytes=(54 if busy else 1) << 30, mem_total_bytes=80 << 30,
        power_w=(540 if busy else 70) + 60 * wave + 4 * heat,
    )  # fmt: skip


def feed(window: MainWindow) -> None:
    fleet = window.session.fleet
    for n, target in enumerate(TARGETS):
        updates = [InventoryUpdate(target, inventory(n)), LinkUpdate(target, LinkState.CONNECTED)]
        window.session.pump.fleetChanged.emit(fleet.apply_all(updates))  # as a frame hands it
    feed_samples(fleet, TARGETS, sample, TICKS, NOW_MS)
    window.session.pump.fleetChanged.emit(dict.fromkeys(TARGETS, Change.DATA))


def main() -> int:
    with offline_window(TARGETS, (1366, 768)) as (app, window):
        feed(window)
        window.grid.select(TARGETS[HOT[0]], HOT[1])
        plots = window.detail.plots
        wait_until(app, lambda: plots.point_count() > 800, 10)
        # The temperature plot from its title down in sight (the panel scrolls at this size).
        bar = window.detail.plot_panel.scroll_area.verticalScrollBar()
        bar.setValue(int(plots.plot_item(TEMP_GPU_C).geometry().top()))
        app.processEvents()  # the scroll applied: the mapping below is the one on screen
        box = plots.plot_item(TEMP_GPU_C).getViewBox()
        when = NOW_MS / 1000 - 110  # the GPU above its warning line
        at = plots.mapFromScene(box.mapViewToScene(QPointF(when, 76.0)))
        QTest.mouseMove(plots.viewport(), at)
        wait_until(app, lambda: plots.crosshair.label.isVisible(), 10)
        OUT.mkdir(parents=True, exist_ok=True)
        window.grab().save(str(OUT / "plots-1366.png"))
        window.detail.grab().save(str(OUT / "plots-detail.png"))
        print(f"saved plots-1366.png and plots-detail.png in {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
