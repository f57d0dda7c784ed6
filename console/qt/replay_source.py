"""ReplaySource: feeds the fleet model from a past moment instead of the live links.

`show(at_ms)` puts the moment on screen (FleetModel.show_moment) and asks each node's
GetStateAt off the GUI thread (MomentQueries); the answers come back through the frame
pump, which applies them like any update. Asking is coalesced: a node has at most one
ask in flight, and when its answer is in, it is asked for the newest moment wanted, so
a dragged cursor asks a frame's worth, never every position it passed. `go_live()`
shows the live fleet again; the live feed never stopped.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, Signal

from console.connections.moment_query import MomentQueries
from console.fleet.model import FleetModel
from console.fleet.query_round import next_query_id
from console.fleet.updates import QueryResult
from console.qt.frame_pump import FramePump
from console.qt.named_timer import named_timer

log = logging.getLogger(__name__)


class ReplaySource(QObject):
    # The moment shown (Unix ms), or None: live.
    momentChanged = Signal(object)
    # A node's answer for a moment is in (the banner says who still lags).
    answered = Signal()

    def __init__(self, fleet: FleetModel, pump: FramePump, queries: MomentQueries) -> None:
        super().__init__()
        self.setObjectName("gpufleet-replay-source")
        self._fleet, self._pump, self._queries = fleet, pump, queries
        self.asks = 0  # GetStateAt calls sent (coalescing, measured by the tests)
        # While Play runs (the player sets it): the asks a cursor move may send, fleet-wide,
        # and none after answers. Play moves the cursor every frame, and each node asked
        # again as soon as it answered kept 125 daemons answering 250 times a second and
        # the pump applying a hundred answers a frame (bench/replay_fleet.py). None: every
        # node free to ask is asked (a drag, a step, a typed moment).
        self.asks_per_move: int | None = None
        # A frame brings many nodes' answers: what follows them runs once, after the frame.
        self._after_answers = named_timer(
            self, "gpufleet-replay-answers", self._on_after_answers_timeout, single_shot=True
        )
        pump.queryFinished.connect(self._on_pump_query_finished)

    @property
    def at_ms(self) -> int | None:
        moment = self._fleet.moment
        return moment.wanted_ms if moment is not None else None

    def show(self, at_ms: int) -> None:
        """Show the fleet at `at_ms`: every view, with the next frame that brings a node's
        answer (the banner at once)."""
        if at_ms == self.at_ms:
            return
        self._pump.mark_changed(self._fleet.show_moment(at_ms))
        self._ask()
        self.momentChanged.emit(at_ms)

    def go_live(self) -> None:
        if self._fleet.moment is None:
            return
        self._pump.mark_changed(self._fleet.show_live())
        self.momentChanged.emit(None)

    def catch_up(self) -> None:
        """Ask every node free to ask and not showing the moment wanted (Play paused: the
        nodes it left behind under its budget)."""
        self._ask()

    def _ask(self) -> None:
        moment = self._fleet.moment
        if moment is None:
            return
        at_ms = moment.wanted_ms
        for target in moment.due((n.target for n in self._fleet), self.asks_per_move):
            query_id = next_query_id()
            moment.asked(target, at_ms, query_id)
            self._queries.ask(target, at_ms, self._fleet.node(target).gpu_count, query_id)
            self.asks += 1

    def _on_pump_query_finished(self, _result: QueryResult) -> None:
        # Once for the frame's answers, not once each: each asked again over every node
        # and had the strip and the player redo their work (O(nodes²) a frame, 100 ms
        # and more with 125 nodes answering during Play: bench/replay_fleet.py).
        if self._fleet.moment is not None and not self._after_answers.isActive():
            self._after_answers.start(0)

    def _on_after_answers_timeout(self) -> None:
        if self._fleet.moment is None:
            return
        if self.asks_per_move is None:  # (while Play runs, its next move asks)
            self._ask()  # nodes free again: the newest moment wanted, where it differs
        self.answered.emit()
