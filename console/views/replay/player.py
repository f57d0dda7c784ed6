"""ReplayPlayer: Play moves the time cursor on at a speed, frame by frame, on the GUI thread.

Each frame of a timer at the frame pump's rate moves the cursor on by the real time
since the last frame times the speed, and shows it (ReplaySource.show, which asks
each node at most one moment at a time: while an answer is out the cursor moves on
and only the newest moment is asked; and, while playing, at most PLAY_ASKS_PER_FRAME
nodes a frame, those showing the oldest moment first, so a large fleet moves in turn).
Each answer is judged (console.fleet.playback): a critical alert firing in it that the
moment before did not have pauses the play at that answer's moment, and the banner
says why. Reaching the present returns to live.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import QObject, Signal

from console.fleet.alert_rows import AlertRow
from console.fleet.model import FleetModel
from console.fleet.playback import SPEEDS, Playback
from console.qt.frame_pump import DEFAULT_FPS
from console.qt.named_timer import named_timer
from console.qt.replay_source import ReplaySource

FRAME_MS = round(1000 / DEFAULT_FPS)
# GetStateAt calls a frame while playing, fleet-wide (ReplaySource.asks_per_move): 160 a
# second at 20 frames, each node in turn. A few nodes move every frame; 125 each about
# once a second (at 60x, a minute of the past), the fleet's daemons not kept busy.
PLAY_ASKS_PER_FRAME = 8
# Play waits this long (on its clock) for every node's answer at the moment it starts
# from; then it plays with the nodes that answered and names the others (a node hung,
# or an answer lost, kept Play from starting at all).
START_WAIT_MS = 5000
PRESENT_MESSAGE = "Replay: played to the present; live"


def _monotonic_ms() -> float:
    return time.monotonic() * 1000


def _wall_ms() -> int:
    return int(time.time() * 1000)


class ReplayPlayer(QObject):
    playingChanged = Signal(bool)
    noteChanged = Signal(str)  # what the banner adds: "playing at 60x", or why it paused
    reachedPresent = Signal(str)  # played to now: back to live (the status line's words)

    def __init__(self, fleet: FleetModel, source: ReplaySource,
                 start_of_window: Callable[[], int]) -> None:  # fmt: skip
        super().__init__()
        self._fleet, self._source, self._start_of_window = fleet, source, start_of_window
        self.playback = Playback()
        # The pace (a monotonic clock, ms) and the present (Unix ms): a test plays on its own.
        self.clock: Callable[[], float] = _monotonic_ms
        self.now: Callable[[], int] = _wall_ms
        self.note = ""
        # Play waits for the answers for the moment it starts from: what fires there
        # already is no news (console.fleet.playback), once it is known.
        self._starting = False
        self._start_ms = 0.0  # when Play was pressed, on its clock
        self._timer = named_timer(
            self, "gpufleet-replay-play", self._on_timer_timeout, interval_ms=FRAME_MS
        )
        source.answered.connect(self._on_source_answered)
        source.momentChanged.connect(self._on_source_moment_changed)

    @property
    def playing(self) -> bool:
        return self.playback.playing

    def toggle(self) -> None:
        if self.playing:
            self.pause("paused")
        else:
            self.play()

    def play(self) -> None:
        """Play from the moment shown; from the window's start while live."""
        if self._source.at_ms is None:
            self._source.show(self._start_of_window())
        self.playback.play(self.clock(), self._firing())
        self._starting = True
        self._start_ms = self.clock()
        self._timer.start()
        self.playingChanged.emit(True)
        self._say(self._playing_note())

    def pause(self, note: str) -> None:
        self.playback.pause()
        self._timer.stop()
        self._source.asks_per_move = None
        self._source.catch_up()
        self.playingChanged.emit(False)
        self._say(note)

    def set_speed(self, label: str) -> None:
        self.playback.speed = SPEEDS[label]
        if self.playing:
            self._say(self._playing_note())

    def _firing(self) -> list[AlertRow]:
        moment = self._fleet.moment
        return moment.alerts.alerts() if moment is not None else []

    def _playing_note(self) -> str:
        return f"playing at {self.playback.speed}x, Space pauses"

    def _say(self, note: str) -> None:
        self.note = note
        self.noteChanged.emit(note)

    def _on_timer_timeout(self) -> None:
        at_ms = self._source.at_ms
        if at_ms is None or not self.playing:
            self.pause("")
            return
        if self._starting:
            moment = self._fleet.moment
            late = moment.late() if moment is not None else []
            if late and self.clock() - self._start_ms < START_WAIT_MS:
                return
            self._starting = False
            self._source.asks_per_move = PLAY_ASKS_PER_FRAME
            self.playback.play(self.clock(), self._firing())
            if late:
                names = ", ".join(self._fleet.name_of(t) for t in late)
                self._say(f"{self._playing_note()}; no answer yet from {names}")
            return
        step = self.playback.advance(at_ms, self.clock(), self.now())
        if step.live:
            self.pause("")
            self._source.go_live()
            self.reachedPresent.emit(PRESENT_MESSAGE)
        else:
            self._source.show(step.at_ms)

    def _on_source_answered(self) -> None:
        moment = self._fleet.moment
        if not self.playing or self._starting or moment is None:
            return
        new = self.playback.judge(self._firing())
        if not new:
            return
        alert = new[0]
        where = self._fleet.name_of(alert.target)
        if alert.gpu_index is not None:
            where += f" GPU {alert.gpu_index}"
        self.pause(f"paused: a new critical alert, {where}: {alert.summary}")
        shown = moment.nodes.get(alert.target)
        if shown is not None:  # the moment that showed it, not where the cursor ran on to
            self._source.show(shown.at_ms)

    def _on_source_moment_changed(self, at_ms: int | None) -> None:
        if at_ms is None:  # live: by a person (Esc, End, ● Live) or by playing to now
            if self.playing:
                self.pause("")
            self._say("")
