"""Render the fleet grid's density and finding screenshots into docs/screenshots:

- density-1366.png: 4 nodes x 8 GPUs at 1366x768, every tile in sight, sorted hottest first;
- density-4k.png: the same fleet at 3840x2160, tiles grown to their largest;
- density-compact.png: 1,000 GPUs (125 nodes) at 1920x1080 as compact tiles;
- search.png: Ctrl+F, a Slurm job id typed, its GPU selected and shown in the detail.

    xvfb-run -a .venv/bin/python docs/screenshots/density_screenshots.py [OUT_DIR]

(Without a display it renders offscreen.) The real MainWindow over a ConsoleSession
whose samples are built as gpufleet.v1 messages and decoded by the console's own
decoder, as the network thread's are; keys go in through QTest.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication
from shot_tools import wait_until

from console.app import has_display, qt_application
from console.connections.decode import decode_batch
from console.fleet.model import Change
from console.fleet.updates import GpuInfo, InventoryUpdate, LinkState, LinkUpdate
from console.fleet.updates import NodeInfo as Node
from console.main_window import MainWindow
from console.session import ConsoleSession
from gpufleet.v1 import node_pb2 as pb

OUT = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent
NOW_MS = int(time.time() * 1000)
USERS = ("alice", "bob", "carol", "dmitri")


def targets(nodes: int) -> list[str]:
    return [f"10.0.{n // 200}.{n % 200 + 1}:50051" for n in range(nodes)]


def inventory(n: int) -> Node:
    gpus = tuple(GpuInfo(i, f"GPU-{n:04d}{i:04d}-77e2-4b0f-9d3e-5c1f0e6b2a{i:02d}",
                         "NVIDIA H100 80GB HBM3", None, f"0000:{i + 0x18:02x}:00.0", 80 << 30,
                         700.0)
                 for i in range(8))  # fmt: skip
    return Node(f"gpu-node-{n + 1:02d}", "550.90.07", "12.4", "0.1", "nvml", True, "", 1.0, gpus)


def sample(n: int, gpu: int) -> pb.GpuSample:
    wave = math.sin(7 * gpu + 13 * n)
    busy = (n * 8 + gpu) % 3 != 0
    processes = []
    if busy:
        processes.append(pb.GpuProcess(
            pid=4000 + gpu, start_time_unix_ms=NOW_MS - 3_600_000, user=USERS[(n + gpu) % 4],
            command="python train.py", gpu_memory_bytes=50 << 30,
            slurm_job_id=str(4200 + n * 2 + gpu // 4),
        ))  # fmt: skip
    return pb.GpuSample(
        index=gpu, health=pb.GPU_HEALTH_OK,
        temp_gpu_c=(62 if busy else 36) + 9 * wave,
        util_gpu_pct=max(0.0, (86 if busy else 1) + 12 * wave),
        mem_used_bytes=(54 if busy else 1) << 30, mem_total_bytes=80 << 30,
        power_w=(540 if busy else 70) + 60 * wave, processes=processes,
    )  # fmt: skip


def feed(window: MainWindow, nodes: list[str]) -> None:
    fleet = window.session.fleet
    updates = [u for n, target in enumerate(nodes)
               for u in (InventoryUpdate(target, inventory(n)),
                         LinkUpdate(target, LinkState.CONNECTED))]  # fmt: skip
    window.session.pump.fleetChanged.emit(fleet.apply_all(updates))  # as one frame hands it
    for tick in range(3):
        stamp = NOW_MS - (3 - tick) * 1000
        for n, target in enumerate(nodes):
            batch = pb.SampleBatch(timestamp_unix_ms=stamp,
                                   gpus=[sample(n, g) for g in range(8)])  # fmt: skip
            fleet.apply(decode_batch(target, batch, 8))
    window.session.pump.fleetChanged.emit(dict.fromkeys(nodes, Change.DATA))


def open_window(app: QApplication, nodes: list[str], width: int, height: int) -> MainWindow:
    session = ConsoleSession(nodes)
    session.connections.start()  # the network thread, connected to nothing: no daemon here
    window = MainWindow(session)
    window.resize(width, height)
    window.show()
    feed(window, nodes)
    wait_until(app, lambda: window.grid_part.summary.parts["hottest"].isVisible(), 10)
    settle(app)
    return window


def settle(app: QApplication) -> None:
    for _ in range(20):  # relayouts and repaints the resize and the data posted
        app.processEvents()
        time.sleep(0.01)


def close(window: MainWindow) -> None:
    window.close()
    window.session.stop()


def main() -> int:
    app = qt_application(offscreen=not has_display())
    OUT.mkdir(parents=True, exist_ok=True)
    four = targets(4)
    window = open_window(app, four, 1366, 768)
    window.grid_part.sort_by.setCurrentText("hottest first")
    window.grid.select(four[2], 5)
    settle(app)
    window.grab().save(str(OUT / "density-1366.png"))
    window.resize(3840, 2160)
    settle(app)
    window.grab().save(str(OUT / "density-4k.png"))
    close(window)
    window = open_window(app, targets(125), 1920, 1080)
    window.grid.select(targets(125)[40], 3)
    settle(app)
    window.grab().save(str(OUT / "density-compact.png"))
    close(window)
    window = open_window(app, four, 1366, 768)
    window.activateWindow()
    wait_until(app, lambda: QApplication.activeWindow() is window, 10)
    settle(app)
    QTest.keyClick(window, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    wait_until(app, lambda: QApplication.focusWidget() is window.grid_part.search.line, 10)
    QTest.keyClicks(window.grid_part.search.line, "4205")  # a Slurm job id
    QTest.keyClick(window.grid_part.search.line, Qt.Key.Key_Return)  # its second GPU
    settle(app)
    window.grab().save(str(OUT / "search.png"))
    close(window)
    print(f"saved density-1366.png, density-4k.png, density-compact.png and search.png in {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
