"""A demo node's past: a simulated day written into its history before it starts sampling.

`gpufleet daemon --demo` starts with the last 24 hours already in its history
store, so the console's 24 h plots, the usage of yesterday and a history query
for "a day ago" have something to show on the first start. The readings come
from the simulated backend's own model (same GPUs, same seed, no scenario),
run from 24 hours ago to now; they go in through the store's own API
(`append`, `flush`), so every tier is downsampled as the sampler's ticks are.

Written in bulk and coarse where no tier keeps more: a tick a minute before the
last hour (the 10 s and 1 min tiers fold it), a tick every sample interval in the
last hour (the raw tier's hour: a 15 min plot reads the raw tier, and a tick
every 10 s there read as a gap after every point), about 5,000 ticks in all at
1 s, a few seconds a node.
The store's boot clock follows the stamps, so its retention counts back from now
and sees no clock step.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from node_daemon.backends.simulated import SimulatedBackend
from node_daemon.history.settings import HistorySettings
from node_daemon.history.store import HistoryStore

log = logging.getLogger(__name__)

DAY_MS = 86_400_000
HOUR_MS = 3_600_000
OLD_STEP_MS = 60_000  # before the last hour: the 1 min tier's step
# A commit every this many ticks: a tick makes up to 3 rows, and a store drops the oldest
# of more than MAX_UNWRITTEN_ROWS waiting (4,000) as a full disk would.
FLUSH_EVERY_TICKS = 500


def demo_day_stamps(now_ms: int, raw_step_ms: int) -> list[int]:
    """The seeded ticks' stamps: from 24 h before `now_ms` up to (not at) `now_ms`, the
    last hour every `raw_step_ms` (the node's sample interval)."""
    start = now_ms - DAY_MS
    start -= start % OLD_STEP_MS  # whole steps, as the tiers fold them
    recent = now_ms - HOUR_MS
    old = list(range(start, recent, OLD_STEP_MS))
    return old + list(range(old[-1] + OLD_STEP_MS, now_ms, max(1, raw_step_ms)))


def seed_demo_day(
    path: Path,
    settings: HistorySettings,
    raw_step_ms: int,
    simulated: dict[str, object],
    now_ms: int | None = None,
) -> int:
    """Write a simulated day before `now_ms` into the history at `path`; the ticks written.

    Nothing is written where the history already holds points (a demo node
    restarted keeps what it has). `simulated`: SimulatedBackend's arguments
    (gpu_count, seed, model) for the node's own GPUs.
    """
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    stamps = demo_day_stamps(now_ms, raw_step_ms)
    clock = _StampClock(stamps[0])
    store = HistoryStore(path, settings, raw_step_ms, boot_clock=clock.seconds)
    try:
        if any(oldest is not None for oldest in store.oldest_ms().values()):
            return 0
        backend = SimulatedBackend(start_unix_ms=stamps[0], **simulated)  # type: ignore[arg-type]
        backend.open()
        previous = stamps[0] - OLD_STEP_MS
        for count, stamp in enumerate(stamps, 1):
            readings = backend.advance((stamp - previous) / 1000)
            clock.now_ms, previous = stamp, stamp
            store.append(stamp, readings)
            if count % FLUSH_EVERY_TICKS == 0:
                store.flush()  # the store keeps at most MAX_UNWRITTEN_ROWS waiting
        store.flush()
    finally:
        store.close()
    log.info("demo node: a simulated day of history written (%d ticks)", len(stamps))
    return len(stamps)


class _StampClock:
    """The store's boot clock while seeding: the tick being written, so stamps a minute
    apart written at once read as a minute passing, not as a clock step."""

    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms

    def seconds(self) -> float:
        return self.now_ms / 1000
