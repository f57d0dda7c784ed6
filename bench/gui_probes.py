"""Probes on the console's GUI thread: event-dispatch time, a heartbeat, loop helpers.

- TimedApplication times every top-level event the GUI thread dispatches
  (timers, posted events, repaints): their sum over wall time is the busy fraction.
- Heartbeat is a 5 ms timer; how late it fires shows the longest the GUI
  thread could not react (a stall).
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable

from PySide6.QtCore import QEvent, QEventLoop, QObject, Qt, QTimer
from PySide6.QtWidgets import QApplication


class TimedApplication(QApplication):
    """Sums the duration of every top-level event delivery while `measuring` is set.

    Nested deliveries (an event sent from inside another) count once, in their
    parent. Events to `probe` (the heartbeat's timer) are summed apart as well,
    so the probe's own cost can be taken out. The longest deliveries are kept
    with what they were, to tell what caused a stall.
    """

    KEEP_LONGEST = 5

    def __init__(self, argv: list[str]) -> None:
        super().__init__(argv)
        self.measuring = False
        self.probe: QObject | None = None
        self._depth = 0
        self.reset()

    def reset(self) -> None:
        self.busy_s = 0.0
        self.busy_cpu_s = 0.0
        self.probe_s = 0.0
        self.probe_cpu_s = 0.0
        self.events = 0
        self.longest: list[tuple[float, str]] = []
        # Paint events by widget ("QLabel('kpi')"): count, seconds, CPU seconds. Its own
        # paintEvent: its children are painted by Qt in events of their own.
        self.paints: dict[str, list[float]] = {}

    def notify(self, receiver: QObject, event: QEvent) -> bool:
        if not self.measuring:
            return super().notify(receiver, event)
        if event.type() == QEvent.Type.Paint:
            return self._timed_paint(receiver, event)
        if self._depth:
            return super().notify(receiver, event)
        self._depth = 1
        started, started_cpu = time.perf_counter(), time.thread_time()
        try:
            return super().notify(receiver, event)
        finally:
            elapsed, elapsed_cpu = time.perf_counter() - started, time.thread_time() - started_cpu
            self._depth = 0
            self.busy_s += elapsed
            self.busy_cpu_s += elapsed_cpu
            self.events += 1
            if receiver is self.probe:
                self.probe_s += elapsed
                self.probe_cpu_s += elapsed_cpu
            if len(self.longest) < self.KEEP_LONGEST or elapsed > self.longest[0][0]:
                self._keep_long(elapsed, receiver, event)

    def _timed_paint(self, receiver: QObject, event: QEvent) -> bool:
        """Deliver a paint event (nested in a repaint, or top-level), adding its time to
        its widget's line in `paints` (and to the busy time where it is top-level)."""
        what = f"{type(receiver).__name__}({receiver.objectName()!r})"
        top = not self._depth
        self._depth += 1
        started, started_cpu = time.perf_counter(), time.thread_time()
        try:
            return super().notify(receiver, event)
        finally:
            elapsed, elapsed_cpu = time.perf_counter() - started, time.thread_time() - started_cpu
            self._depth -= 1
            line = self.paints.setdefault(what, [0, 0.0, 0.0])
            line[0] += 1
            line[1] += elapsed
            line[2] += elapsed_cpu
            if top:
                self.busy_s += elapsed
                self.busy_cpu_s += elapsed_cpu
                self.events += 1

    def paint_table(self, wall_s: float, top: int = 12) -> list[dict[str, object]]:
        """The widgets that cost the most paint time: per second of wall time."""
        lines = sorted(self.paints.items(), key=lambda kv: kv[1][1], reverse=True)[:top]
        return [
            {"widget": what, "paints_per_s": round(n / wall_s, 1),
             "ms_per_s": round(s * 1000 / wall_s, 2), "cpu_ms_per_s": round(c * 1000 / wall_s, 2)}
            for what, (n, s, c) in lines
        ]  # fmt: skip

    def work(self) -> tuple[float, float]:
        """(wall, CPU) seconds of event work so far, less the probe's own."""
        return self.busy_s - self.probe_s, self.busy_cpu_s - self.probe_cpu_s

    def _keep_long(self, elapsed_s: float, receiver: QObject, event: QEvent) -> None:
        try:
            name = repr(receiver.objectName())
        except RuntimeError:  # deleted while handling this event (a finished animation)
            name = "deleted"
        what = f"{type(receiver).__name__}({name}) {event.type().name}"
        heapq.heappush(self.longest, (elapsed_s, what))
        if len(self.longest) > self.KEEP_LONGEST:
            heapq.heappop(self.longest)


class Heartbeat(QObject):
    """A precise timer every `interval_ms`; records the gap between consecutive ticks."""

    def __init__(self, interval_ms: int = 5) -> None:
        super().__init__()
        self.interval_s = interval_ms / 1000
        self.timer = QTimer(self)
        self.timer.setObjectName("bench-heartbeat")
        self.timer.setTimerType(Qt.TimerType.PreciseTimer)
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self._on_timer_timeout)
        self.gaps_s: list[float] = []
        self._last: float | None = None

    def start(self) -> None:
        self.gaps_s, self._last = [], None
        self.timer.start()

    def stop(self) -> None:
        self.timer.stop()

    def _on_timer_timeout(self) -> None:
        now = time.perf_counter()
        if self._last is not None:
            self.gaps_s.append(now - self._last)
        self._last = now

    def stalls_s(self) -> list[float]:
        """How much later than due each tick came."""
        return [max(0.0, gap - self.interval_s) for gap in self.gaps_s]


def run_for(seconds: float) -> None:
    """Run the Qt event loop for `seconds`."""
    wait_until(None, seconds)


def wait_until(predicate: Callable[[], bool] | None, timeout_s: float, poll_ms: int = 50) -> bool:
    """Run the Qt event loop until `predicate()` holds or `timeout_s` passes."""
    loop = QEventLoop()

    def check() -> None:
        if predicate is not None and predicate():
            loop.quit()

    deadline = _named_timer("bench-wait-deadline", round(timeout_s * 1000), loop.quit)
    deadline.setSingleShot(True)
    poll = _named_timer("bench-wait-poll", poll_ms, check)
    deadline.start()
    if predicate is not None:
        poll.start()
    loop.exec()
    deadline.stop()
    poll.stop()
    return predicate() if predicate is not None else True


def _named_timer(name: str, interval_ms: int, slot: Callable[[], object]) -> QTimer:
    timer = QTimer()
    timer.setObjectName(name)
    timer.setInterval(interval_ms)
    timer.timeout.connect(slot)
    return timer
