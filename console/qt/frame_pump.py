"""FramePump: hands network updates to the GUI at a frame rate, never per message.

Each frame also asks the fleet model which nodes have gone quiet (its data
watchdog), so a node that stops sending is noticed within a frame of its deadline.
"""

from __future__ import annotations

import time

from PySide6.QtCore import QObject, Signal

from console.connections.manager import UpdateInbox
from console.fleet.model import Change, FleetModel
from console.fleet.updates import CommandResult, QueryResult
from console.qt.named_timer import named_timer

DEFAULT_FPS = 20
# Most updates applied in one frame: a burst (a console starting against a fleet
# with history to replay) is spread over frames instead of freezing one.
MAX_UPDATES_PER_FRAME = 4000


class FramePump(QObject):
    """Once per frame: drain the inbox into the fleet model, then say what changed.

    `fleetChanged` carries {target: Change} for the nodes touched this frame;
    views repaint once per frame however many samples arrived.
    """

    fleetChanged = Signal(object)
    # New events (list[EventRow]) applied this frame, each once: for notifiers and logs.
    eventsArrived = Signal(object)
    # The answer to an action (CommandResult), for the message line.
    commandFinished = Signal(object)
    # The answer to a query (QueryResult: audit log, usage), for whoever asked.
    queryFinished = Signal(object)

    def __init__(self, inbox: UpdateInbox, fleet: FleetModel, fps: int = DEFAULT_FPS) -> None:
        super().__init__()
        self.setObjectName("gpufleet-frame-pump")
        self._inbox, self._fleet = inbox, fleet
        self._timer = named_timer(
            self, "gpufleet-frame-timer", self.pump, interval_ms=round(1000 / fps)
        )
        self.last_frame_s = 0.0
        self.frames = 0
        self._marked: dict[str, Change] = {}

    def mark_changed(self, changes: dict[str, Change]) -> None:
        """Changes made to the fleet model on the GUI thread between frames (a replayed
        moment shown, the live fleet again): said with the next frame's."""
        for target, change in changes.items():
            self._marked[target] = max(self._marked.get(target, change), change,
                                       key=lambda c: c.value)  # fmt: skip

    def start(self) -> None:
        self._timer.start()

    def stop(self) -> None:
        self._timer.stop()

    @property
    def running(self) -> bool:
        """Between start() and stop(): the session's network is up to be asked."""
        return self._timer.isActive()

    def pump(self) -> dict[str, Change]:
        started = time.perf_counter()
        updates = self._inbox.drain(MAX_UPDATES_PER_FRAME)
        results = [u for u in updates if isinstance(u, CommandResult)]
        answers = [u for u in updates if isinstance(u, QueryResult)]
        changes = self._fleet.apply_all(updates)
        marked, self._marked = self._marked, {}
        for target, change in marked.items():
            if change.value > changes.get(target, Change.NONE).value:
                changes[target] = change
        if not self._inbox:
            # Judged only with every batch that arrived applied: a backlog in the
            # inbox is the console's delay, not the nodes' silence.
            for target, change in self._fleet.check_staleness().items():
                changes.setdefault(target, change)
        if changes:
            self.fleetChanged.emit(changes)
        events = self._fleet.take_new_events()
        if events:
            self.eventsArrived.emit(events)
        for result in results:
            self.commandFinished.emit(result)
        for answer in answers:
            self.queryFinished.emit(answer)
        self.last_frame_s = time.perf_counter() - started
        self.frames += 1
        return changes
