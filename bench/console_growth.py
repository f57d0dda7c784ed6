"""Benchmark: how the console's cost grows with the fleet (issue: fleet scale).

Runs bench/console_fleet.py at 64, 256, 1,000 and 2,000 GPUs (8 per node), one
after the other, and plots the console's CPU, GUI-thread busy time, frame time
p99 and RSS against the number of GPUs into a PNG, so the growth is visible at
a glance. With --light the fleet is bench/light_fleet.py's light nodes in 4
processes, at 1,000, 2,500, 5,000 and 10,000 GPUs (issue #31), and the harness's
own CPU is in the table and the JSON (--out), so the console's share is clear.

    .venv/bin/python bench/console_growth.py [--seconds 30] [--png docs/console-growth.png]
    .venv/bin/python bench/console_growth.py --light --out bench/results/console_growth_light.json \
        --png docs/console-growth-10k.png
    .venv/bin/python bench/console_growth.py --smoke     # 16 and 32 GPUs, 3 s each
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
SIZES = (64, 256, 1000, 2000)
LIGHT_SIZES = (1000, 2500, 5000, 10000)
LIGHT_PROCESSES = "4"
SMOKE_SIZES = (16, 32)
GPUS_PER_NODE = 8


def measure(gpus: int, seconds: float, out: Path, light: bool = False) -> dict[str, float]:
    nodes = str(gpus // GPUS_PER_NODE)
    command = [sys.executable, str(HERE / "console_fleet.py"), "--nodes", nodes,
               "--seconds", str(seconds), "--out", str(out)]  # fmt: skip
    if light:
        command += ["--light", "--fleet-processes", LIGHT_PROCESSES, "--warmup", "20"]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    result = json.loads(out.read_text())
    return {
        "gpus": gpus,
        "console_cpu_pct": result["cpu_pct"]["console"],
        "gui_busy_pct": result["gui"]["busy_pct"],
        "frame_p99_ms": result["frame_ms"]["frame"]["p99"],
        "console_rss_mib": result["memory_mib"]["console_rss"],
        "fleet_cpu_pct": result["cpu_pct"]["fleet"],
        "gui_thread_cpu_pct": result["cpu_pct"]["console_gui_thread"],
        "net_thread_cpu_pct": result["cpu_pct"]["console_net_thread"],
        "frame_p50_ms": result["frame_ms"]["frame"]["p50"],
        "sample_to_pixel_p99_ms": result["latency_ms"]["sample_to_pixel"]["p99"],
        "all_streaming_s": result["connect"]["all_streaming_s"],
        "connect_max_stall_ms": result["connect"]["max_stall_ms"],
    }


def plot(rows: Sequence[dict[str, float]], png: Path) -> None:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    import pyqtgraph as pg
    from PySide6.QtWidgets import QApplication

    _app = QApplication.instance() or QApplication([])
    pg.setConfigOptions(background="w", foreground="k", antialias=True)
    layout = pg.GraphicsLayoutWidget()
    layout.resize(1000, 640)
    x = [r["gpus"] for r in rows]
    panels = (
        ("console CPU (% of one core)", "console_cpu_pct"), ("GUI thread busy (%)", "gui_busy_pct"),
        ("frame time p99 (ms)", "frame_p99_ms"), ("console RSS (MiB)", "console_rss_mib"),
    )  # fmt: skip
    for i, (title, key) in enumerate(panels):
        item = layout.addPlot(row=i // 2, col=i % 2, title=title)
        item.plot(x, [r[key] for r in rows], pen=pg.mkPen("#2b6cb0", width=2), symbol="o")
        item.setLabel("bottom", "GPUs")
        item.setYRange(0, max(r[key] for r in rows) * 1.2)
    layout.show()
    _app.processEvents()
    layout.grab().save(str(png))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="measured seconds per size")
    parser.add_argument("--png", type=Path, default=HERE.parent / "docs" / "console-growth.png")
    parser.add_argument("--light", action="store_true",
                        help="light nodes (light_fleet.py), 1,000 to 10,000 GPUs")  # fmt: skip
    parser.add_argument("--out", type=Path, metavar="FILE.json", help="the rows as JSON")
    parser.add_argument("--smoke", action="store_true", help="two tiny sizes, 3 s each")
    args = parser.parse_args(argv)
    sizes = LIGHT_SIZES if args.light else SIZES
    sizes, seconds = (SMOKE_SIZES, 3.0) if args.smoke else (sizes, args.seconds)
    with tempfile.TemporaryDirectory() as tmp:
        rows = [measure(g, seconds, Path(tmp) / f"{g}.json", args.light) for g in sizes]
    print(f"{'GPUs':>6} {'console CPU %':>14} {'GUI busy %':>11} {'frame p99 ms':>13} "
          f"{'RSS MiB':>8} {'fleet CPU %':>12}")  # fmt: skip
    for r in rows:
        print(f"{r['gpus']:>6} {r['console_cpu_pct']:>14.1f} {r['gui_busy_pct']:>11.1f} "
              f"{r['frame_p99_ms']:>13.1f} {r['console_rss_mib']:>8.0f} "
              f"{r['fleet_cpu_pct']:>12.1f}")  # fmt: skip
    if args.out is not None:
        result = {"benchmark": "console_growth", "fleet": "light" if args.light else "daemons",
                  "seconds": seconds, "rows": rows}  # fmt: skip
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    png = Path(tempfile.gettempdir()) / "console-growth-smoke.png" if args.smoke else args.png
    plot(rows, png)
    print(f"plot: {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
