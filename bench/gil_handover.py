"""Benchmark: what a busy Python thread costs the GUI thread's calls into Qt, by the
interpreter's switch interval (console/app.py, GIL_SWITCH_S).

    python bench/gil_handover.py            # 2,000 fillRect calls, 4 intervals (~10 s)
    python bench/gil_handover.py --smoke    # one interval, few calls: does it run?

PySide releases the interpreter lock around each call into Qt. When another Python
thread is running (the console's network thread decoding a burst of answers), it takes
the lock at once, and the GUI thread, back from Qt, waits for it: up to the switch
interval, after which Python asks the other thread to let go. A grid repaint makes
about a thousand such calls. This paints `--calls` small rectangles into an image (the
calls a repaint makes, without a window) alone, then beside a thread that runs Python
without pause, and reports the median time of `--rounds` paints and the cost per call.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from machine import describe_machine
from PySide6.QtCore import QRect
from PySide6.QtGui import QColor, QGuiApplication, QImage, QPainter

INTERVALS_S = (0.005, 0.001, 0.0002, 0.0001)  # Python's default first


def paint(image: QImage, calls: int) -> float:
    painter = QPainter(image)
    colour = QColor("#336699")
    started = time.perf_counter()
    for i in range(calls):
        painter.fillRect(QRect(i % 1900, (i // 1900) % 1000, 10, 10), colour)
    elapsed = time.perf_counter() - started
    painter.end()
    return elapsed


def busy_python(stop: threading.Event) -> None:
    count = 0
    while not stop.is_set():
        count += 1  # Python bytecode without pause: it holds the lock whenever it can


def measure(interval_s: float, calls: int, rounds: int) -> dict[str, float]:
    sys.setswitchinterval(interval_s)
    image = QImage(1920, 1080, QImage.Format.Format_ARGB32_Premultiplied)
    alone = statistics.median(paint(image, calls) for _ in range(rounds))
    stop = threading.Event()
    thread = threading.Thread(target=busy_python, args=(stop,), name="bench-busy")
    thread.start()
    try:
        beside = statistics.median(paint(image, calls) for _ in range(rounds))
    finally:
        stop.set()
        thread.join()
    return {
        "switch_interval_ms": interval_s * 1000,
        "alone_ms": round(alone * 1000, 2),
        "beside_busy_thread_ms": round(beside * 1000, 2),
        "per_call_us": round((beside - alone) / calls * 1e6, 1),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="Qt calls a paint (2000)")
    parser.add_argument("--rounds", type=int, default=9, help="paints each way (9)")
    parser.add_argument("--out", type=Path, metavar="FILE.json", help="result as JSON")
    parser.add_argument("--smoke", action="store_true", help="one interval, 200 calls")
    args = parser.parse_args(argv)
    intervals = INTERVALS_S[-1:] if args.smoke else INTERVALS_S
    calls, rounds = (200, 3) if args.smoke else (args.calls, args.rounds)
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    app = QGuiApplication(sys.argv[:1])  # noqa: F841 - painting needs the application
    rows = [measure(interval, calls, rounds) for interval in intervals]
    print(f"{'switch interval':>16}{'alone':>10}{'beside a busy thread':>24}{'per call':>12}")
    for row in rows:
        print(f"{row['switch_interval_ms']:>13} ms{row['alone_ms']:>7} ms"
              f"{row['beside_busy_thread_ms']:>21} ms{row['per_call_us']:>9} us")  # fmt: skip
    if args.out is not None:
        result = {"benchmark": "gil_handover", "calls": calls, "rounds": rounds,
                  "machine": describe_machine(), "rows": rows}  # fmt: skip
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
