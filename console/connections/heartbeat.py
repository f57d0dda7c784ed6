"""NetHeartbeat: whether the console's own network thread has been able to listen.

The data watchdog judges a node silent by when its batches arrive. When the
console's network loop itself cannot run (the laptop was suspended, the VM
paused, the CPU starved by other work, the interpreter lock held for seconds),
every node's batches wait unread in their sockets and every node looks silent
at once: the console's stall, not theirs, and a page for each node would be a
false alarm. So the loop beats every BEAT_S; a beat later than STALL_S marks a
stall, and the watchdog counts a node's silence only from the end of the latest
stall, and not at all while one lasts.

Beaten on the network thread, read on the GUI thread: plain floats, each
written in one assignment.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

BEAT_S = 0.1
# A beat this late means the loop could not run. Well under the watchdog's shortest
# deadline (console/fleet/staleness.py, MIN_STALE_S = 1 s): a node is never judged
# on silence that a stall in progress explains.
STALL_S = 0.5
# Stalls this long are logged: someone looking at a burst of late data learns why.
LOGGED_STALL_S = 1.0


class NetHeartbeat:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.last_beat_s: float | None = None  # None: the loop has not beaten yet
        self.resumed_s = -math.inf  # when the latest stall ended
        self.stalls = 0
        self.longest_stall_s = 0.0

    def beat(self) -> None:
        """One beat of the network loop (on its thread)."""
        now = self._clock()
        last = self.last_beat_s
        if last is not None and now - last > STALL_S:
            stalled_s = now - last
            self.stalls += 1
            self.longest_stall_s = max(self.longest_stall_s, stalled_s)
            self.resumed_s = now
            if stalled_s >= LOGGED_STALL_S:
                log.warning(
                    "the console's network thread could not run for %.1f s (this machine "
                    "was suspended or overloaded): nodes' silence meanwhile is not counted",
                    stalled_s,
                )
        self.last_beat_s = now

    def listening_since(self) -> float | None:
        """Since when the loop has run without a stall: now while one lasts; None before
        the loop's first beat (nothing to say, the data alone is judged)."""
        last = self.last_beat_s
        if last is None:
            return None
        now = self._clock()
        return now if now - last > STALL_S else self.resumed_s

    async def run(self) -> None:
        """Beat until cancelled (a task on the network loop)."""
        while True:
            self.beat()
            await asyncio.sleep(BEAT_S)
