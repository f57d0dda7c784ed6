"""SlurmWatch: the console's latest SlurmView, read again every few seconds.

Every 5 s while the Slurm queue is on screen, every 30 s otherwise (the grid's
drop verdicts and menus still want Slurm's node states), and at once after an
action through Slurm. One read at a time, on the Slurm link's worker; its
answer comes through the frame pump's queryFinished.
"""

from __future__ import annotations

import concurrent.futures
import itertools

from PySide6.QtCore import QObject, Signal

from console.connections.slurm_link import READ, SLURM_TARGET, SlurmLink
from console.fleet.slurm_view import SlurmView
from console.fleet.updates import CommandResult, QueryResult
from console.qt.named_timer import named_timer

SHOWN_INTERVAL_MS = 5_000
HIDDEN_INTERVAL_MS = 30_000


class SlurmWatch(QObject):
    changed = Signal(object)  # SlurmView

    def __init__(self, link: SlurmLink, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.link = link
        self.view = SlurmView()
        self._ids = itertools.count(1)
        self._asked: tuple[int, concurrent.futures.Future[None]] | None = None
        self._again = False
        self._timer = named_timer(self, "slurmReadTimer", self.read_now)
        self._timer.start(HIDDEN_INTERVAL_MS)

    def set_shown(self, shown: bool) -> None:
        """The queue is on screen (read often) or not (read now and then)."""
        self._timer.setInterval(SHOWN_INTERVAL_MS if shown else HIDDEN_INTERVAL_MS)
        if shown:
            self.read_now()

    def read_now(self) -> None:
        if self._asked is not None and not self._asked[1].done():
            self._again = True  # after the one in flight: it may predate an action
            return
        query_id = next(self._ids)
        self._asked = (query_id, self.link.read(query_id))

    def on_query_finished(self, answer: QueryResult) -> None:
        if answer.target != SLURM_TARGET or answer.what != READ:
            return
        if self._asked is None or answer.query_id != self._asked[0]:
            return
        if isinstance(answer.payload, SlurmView):
            # A failed read keeps the last good jobs and nodes, and says why it failed.
            view = answer.payload
            old = self.view
            self.view = view if answer.ok else SlurmView(old.jobs, old.nodes, view.read_at,
                                                         view.error, old.reservations)  # fmt: skip
            self.changed.emit(self.view)
        if self._again:
            self._again = False
            self._asked = None
            self.read_now()

    def on_command_finished(self, result: CommandResult) -> None:
        if "Slurm" in result.what:  # SlurmActions' answers: Slurm changed, read it again
            self.read_now()

    def stop(self) -> None:
        self._timer.stop()
