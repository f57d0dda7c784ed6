"""Benchmark: incident replay's cursor, moved to a new moment until the grid is redrawn
(issue #30), on the demo's four nodes (8 GPUs each, a seeded day of history on disk).

    QT_QPA_PLATFORM=offscreen python bench/replay_cursor.py [--moments 40]

The console's window, offscreen, on the demo's daemons (console/demo_fleet.py). For
each of `--moments` moments spread over the last 24 h, it moves the cursor
(ReplaySource.show, as a drag or a key does) and runs the event loop until every node's
answer for that moment is applied and the grid has painted it; the time from the move to
that paint is reported (median, p95, max), with the GetStateAt calls it took.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO_ROOT), str(REPO_ROOT / "protos")]

from PySide6.QtCore import QEvent, QObject  # noqa: E402

from console.app import qt_application  # noqa: E402
from console.connections.security import LinkSecurity  # noqa: E402
from console.demo_fleet import DemoFleet  # noqa: E402
from console.fleet.updates import LinkState  # noqa: E402
from console.main_window import MainWindow  # noqa: E402
from console.session import ConsoleSession  # noqa: E402


class PaintCounter(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.paints = 0

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Paint:
            self.paints += 1
        return False


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--moments", type=int, default=40)
    args = parser.parse_args()
    app = qt_application()
    with DemoFleet(nodes=4, gpus=8) as demo:
        demo.start()
        session = ConsoleSession(demo.targets, security=LinkSecurity(token=demo.token))
        window = MainWindow(session)
        window.resize(1600, 900)
        session.start()
        window.show()
        fleet = session.fleet
        wait(app, lambda: all(n.state is LinkState.CONNECTED and len(n.live_latest) == 8
                              for n in fleet))  # fmt: skip
        counter = PaintCounter()
        window.grid.installEventFilter(counter)
        now = int(time.time() * 1000)
        took, asks = [], session.replay.asks
        for i in range(args.moments):
            at = now - 60_000 - i * (24 * 3_600_000 // args.moments)
            painted = counter.paints
            started = time.perf_counter()
            session.replay.show(at)
            wait(app, lambda at=at: all(n.moment is not None and n.moment.answered
                                        and n.moment.at_ms == at for n in fleet))  # fmt: skip
            wait(app, lambda p=painted: counter.paints > p)
            took.append(time.perf_counter() - started)
        calls = session.replay.asks - asks
        session.replay.go_live()
        window.close()
        session.stop()
    ms = sorted(t * 1000 for t in took)
    p95 = ms[max(0, round(0.95 * len(ms)) - 1)]
    print(
        f"{len(ms)} moves, 4 nodes x 8 GPUs, {calls} GetStateAt calls: move to redrawn grid "
        f"median {statistics.median(ms):.0f} ms, p95 {p95:.0f} ms, max {ms[-1]:.0f} ms"
    )
    return 0


def wait(app: object, predicate: object, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise TimeoutError("waited too long")
        app.processEvents()  # type: ignore[attr-defined]
        time.sleep(0.001)


if __name__ == "__main__":
    sys.exit(main())
