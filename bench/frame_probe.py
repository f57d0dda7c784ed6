"""FrameProbe: times the console's frames and follows sample batches to the screen.

It drives the session's FramePump from its own timer at the same rate, so it
knows where each frame begins. A frame is one pump that changed something plus
everything the GUI thread did until the next pump (deferred plot updates,
repaints): the sum of the event times TimedApplication measured in between.
Each sample batch is followed from the daemon's timestamp through the network
thread and the inbox to the end of the first repaint after the pump applied it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from PySide6.QtCore import QEvent, QTimer
from PySide6.QtGui import QPaintEvent
from PySide6.QtWidgets import QWidget

from console.fleet.model import Change
from console.fleet.updates import SamplesUpdate, Update
from console.main_window import MainWindow
from console.qt.frame_pump import DEFAULT_FPS
from console.session import ConsoleSession

WorkClock = Callable[[], tuple[float, float]]


@dataclass
class BatchTiming:
    """One sample batch's way to the screen, in wall-clock seconds (time.time())."""

    sampled: float  # the daemon's timestamp of the sweep
    arrived: float  # decoded and put in the inbox by the network thread
    applied: float  # the pump that applied it began
    shown: float = 0.0  # the first repaint after that pump ended (or the pump, if none)

    @property
    def latency_s(self) -> float:
        return self.shown - self.sampled


@dataclass
class Frame:
    """One pump that changed something, and the GUI work until the next pump."""

    pump_s: float
    nodes_changed: int
    plots_refreshed: bool
    pump_ended: float
    work_started: tuple[float, float]
    batches: list[BatchTiming] = field(default_factory=list)
    work_s: float = 0.0  # all GUI event time, pump to next pump (the frame time)
    work_cpu_s: float = 0.0
    repaint_s: float = 0.0  # window UpdateRequests: every dirty widget repainted
    repaints: int = 0
    grid_paint_s: float = 0.0
    plots_paint_s: float = 0.0
    shown: bool = False

    @property
    def off_cpu_s(self) -> float:
        """Frame time the GUI thread was not running: GIL, no free core, Qt paint threads."""
        return max(0.0, self.work_s - self.work_cpu_s)


class FrameProbe:
    """Times frames of a console session. Build it before `session.start()`.

    It wraps (on the instances only) the inbox's `put`, the fleet model's
    `apply_all`, the window's `event` (UpdateRequest) and the paint events of
    the fleet grid and the GPU plots.
    """

    def __init__(self, session: ConsoleSession, window: MainWindow, work_clock: WorkClock) -> None:
        self._session, self._window, self._work_clock = session, window, work_clock
        self.measuring = False
        self.frames: list[Frame] = []
        self.empty_frames = 0
        self.unattributed_repaint_s = 0.0
        self.paint_outside_repaints_s = 0.0
        self._in_repaint = False
        self._frame: Frame | None = None
        self._applying: list[BatchTiming] = []
        self._arrivals: dict[tuple[str, float], float] = {}
        self._timer = QTimer()
        self._timer.setObjectName("bench-frame-timer")
        self._timer.setInterval(round(1000 / DEFAULT_FPS))
        self._timer.timeout.connect(self._on_timer_timeout)
        self._wrap_instances()

    def _wrap_instances(self) -> None:
        session, window = self._session, self._window
        # Instance attributes shadow the methods: only this session is probed.
        inbox, fleet = session.inbox, session.fleet
        inbox.put = self._wrap_put(inbox.put)  # type: ignore[method-assign, assignment]
        fleet.apply_all = self._wrap_apply(fleet.apply_all)  # type: ignore[method-assign, assignment]
        window.event = self._wrap_window_event(window.event)  # type: ignore[method-assign]
        self._wrap_paint(window.grid, "grid_paint_s")
        self._wrap_paint(window.detail.plots, "plots_paint_s")

    def take_over_pump(self) -> None:
        """Stop the session's frame timer; ours calls the same `pump()` at the same rate."""
        self._session.pump.stop()
        self._timer.start()

    def stop(self) -> None:
        self._timer.stop()

    def start_measuring(self) -> None:
        self.frames, self.empty_frames, self._frame = [], 0, None
        self.unattributed_repaint_s = self.paint_outside_repaints_s = 0.0
        self.measuring = True

    def stop_measuring(self) -> None:
        self._close_frame(self._work_clock())
        self.measuring = False

    # -- frames --------------------------------------------------------------

    def _on_timer_timeout(self) -> None:
        work = self._work_clock()  # everything before this timer event
        self._close_frame(work)
        started = time.perf_counter()
        changes = self._session.pump.pump()
        pump_s = time.perf_counter() - started
        applied, self._applying = self._applying, []
        if not changes:
            self.empty_frames += 1
            return
        plots = self._plots_refreshed(changes)
        self._frame = Frame(pump_s, len(changes), plots, time.time(), work, applied)

    def _plots_refreshed(self, changes: dict[str, Change]) -> bool:
        key = self._window.detail.key
        return key is not None and key.target in changes

    def _close_frame(self, work: tuple[float, float]) -> None:
        frame, self._frame = self._frame, None
        if frame is None:
            return
        frame.work_s = work[0] - frame.work_started[0]
        frame.work_cpu_s = work[1] - frame.work_started[1]
        self._mark_shown(frame, frame.pump_ended)
        if self.measuring:
            self.frames.append(frame)

    @staticmethod
    def _mark_shown(frame: Frame, when: float) -> None:
        if not frame.shown:
            frame.shown = True
            for batch in frame.batches:
                batch.shown = when

    def _on_repaint(self, elapsed_s: float) -> None:
        if self._frame is None:
            self.unattributed_repaint_s += elapsed_s if self.measuring else 0.0
            return
        self._frame.repaint_s += elapsed_s
        self._frame.repaints += 1
        self._mark_shown(self._frame, time.time())

    def _on_paint(self, slot: str, elapsed_s: float) -> None:
        if self.measuring and not self._in_repaint:
            self.paint_outside_repaints_s += elapsed_s  # e.g. an expose: not in repaint_s
        if self._frame is not None:
            setattr(self._frame, slot, getattr(self._frame, slot) + elapsed_s)

    # -- wrappers --------------------------------------------------------------

    def _wrap_put(self, put: Callable[[Update], None]) -> Callable[[Update], None]:
        arrivals = self._arrivals

        def timed_put(update: Update) -> None:  # runs on the network thread
            if isinstance(update, SamplesUpdate) and not update.replayed:
                arrivals[(update.target, update.time_s)] = time.time()
            put(update)

        return timed_put

    def _wrap_apply(
        self, apply_all: Callable[[Iterable[Update]], dict[str, Change]]
    ) -> Callable[[Iterable[Update]], dict[str, Change]]:
        def timed_apply_all(updates: Iterable[Update]) -> dict[str, Change]:
            updates = list(updates)
            now = time.time()
            for update in updates:
                if isinstance(update, SamplesUpdate) and not update.replayed:
                    arrived = self._arrivals.pop((update.target, update.time_s), now)
                    self._applying.append(BatchTiming(update.time_s, arrived, now))
            return apply_all(updates)

        return timed_apply_all

    def _wrap_window_event(self, event: Callable[[QEvent], bool]) -> Callable[[QEvent], bool]:
        def timed_event(ev: QEvent) -> bool:
            if ev.type() != QEvent.Type.UpdateRequest:
                return event(ev)
            started = time.perf_counter()
            self._in_repaint = True
            try:
                return event(ev)
            finally:
                self._in_repaint = False
                self._on_repaint(time.perf_counter() - started)

        return timed_event

    def _wrap_paint(self, widget: QWidget, slot: str) -> None:
        paint = widget.paintEvent

        def timed_paint(ev: QPaintEvent) -> Any:
            started = time.perf_counter()
            result = paint(ev)
            self._on_paint(slot, time.perf_counter() - started)
            return result

        widget.paintEvent = timed_paint  # type: ignore[method-assign]
