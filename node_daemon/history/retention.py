"""The time the history's retention counts back from: the sweeps' own time while the wall
clock moves as time passes, never a clock step.

Sweeps are stamped with the wall clock, which an operator or a bad time source can step
(40 days ahead for a few seconds, then back). Counting retention back from the newest
stamp ever seen pruned every point from before such a step, and every new point after it
until real time caught up with the stamp. Here, between two sweeps, the retention time
moves as far as the stamps did when that agrees with a clock that cannot be set (boot
time, which counts a suspend too) within CLOCK_STEP_MS; otherwise the clock was stepped,
and it moves as far as time really passed. It never runs ahead of the newest sweep, so a
step back is followed at once and a sweep is never pruned on its own write.

It starts afresh with each run, from the run's first sweep: nothing from an earlier run
(a far-future stamp on disk) holds it ahead. A clock stepped forward for good (a node
that booted with a wrong clock and was corrected) is taken at the next start; until
then retention keeps more than it is set to (max_bytes still bounds the file).
"""

from __future__ import annotations

import logging
import time

log = logging.getLogger(__name__)

# Between two sweeps, the stamps may move this much more (or less) than time passed and
# still be taken as the clock's own: NTP slews by well under a second a minute, and
# tests and the benchmark stamp ticks seconds apart that they write at once.
CLOCK_STEP_MS = 60_000
_UNSETTABLE = getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC)


def boot_seconds() -> float:
    """Seconds of a clock no one can set; on Linux it counts a suspend (CLOCK_BOOTTIME),
    so a laptop's night asleep is time that passed, not a clock step."""
    return time.clock_gettime(_UNSETTABLE)


class RetentionClock:
    """`observe` each sweep (its stamp, and boot time when it was taken); `now_ms` is the
    time retention counts back from, None before the first sweep."""

    def __init__(self) -> None:
        self.now_ms: int | None = None
        self.steps = 0  # clock steps seen, for the log and the tests
        self._last: tuple[int, int] | None = None  # the last sweep's (stamp, boot) ms

    def observe(self, stamp_ms: int, boot_ms: int) -> None:
        if self.now_ms is None or self._last is None:
            self.now_ms, self._last = stamp_ms, (stamp_ms, boot_ms)
            return
        last_stamp, last_boot = self._last
        moved, passed = stamp_ms - last_stamp, max(0, boot_ms - last_boot)
        if abs(moved - passed) > CLOCK_STEP_MS:
            self.steps += 1
            log.warning("the clock was stepped by %+.0f s between two sweeps (%.0f s passed); "
                        "the metric history's retention follows the time that passed, not "
                        "the step", (moved - passed) / 1000, passed / 1000)  # fmt: skip
            moved = passed
        self.now_ms = min(stamp_ms, self.now_ms + max(0, moved))
        self._last = (stamp_ms, boot_ms)
