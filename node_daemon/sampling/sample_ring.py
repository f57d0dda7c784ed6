"""In-memory history of serialized sample batches, shared by every stream.

The sampler serializes each tick's batch once; every subscriber sends the same
bytes, so N subscribers cost one sweep and one serialization.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class RingEntry:
    timestamp_unix_ms: int
    tick: int
    payload: bytes


class SampleRing:
    """A bounded, thread-safe ring of the latest batches, oldest first."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("history capacity must be at least 1 batch")
        self._entries: deque[RingEntry] = deque(maxlen=capacity)
        self._changed = threading.Condition()
        self._closed = False

    @property
    def capacity(self) -> int:
        return self._entries.maxlen or 0

    def __len__(self) -> int:
        with self._changed:
            return len(self._entries)

    def append(self, entry: RingEntry) -> None:
        with self._changed:
            self._entries.append(entry)
            self._changed.notify_all()

    def latest_tick(self) -> int:
        with self._changed:
            return self._entries[-1].tick if self._entries else 0

    def since(self, timestamp_unix_ms: int) -> tuple[list[RingEntry], int]:
        """Entries newer than the timestamp, and the latest tick, read atomically."""
        with self._changed:
            newer = [e for e in self._entries if e.timestamp_unix_ms > timestamp_unix_ms]
            return newer, self._entries[-1].tick if self._entries else 0

    def wait_after(self, tick: int, timeout_s: float) -> list[RingEntry]:
        """Entries after `tick`, waiting up to timeout_s for one; [] on timeout or close."""
        with self._changed:
            self._changed.wait_for(lambda: self._closed or self._newest_tick() > tick, timeout_s)
            # New batches are at the end: walk back only over what the stream misses,
            # not over the hour of history it already has.
            newer = list(itertools.takewhile(lambda e: e.tick > tick, reversed(self._entries)))
            return newer[::-1]

    def _newest_tick(self) -> int:
        return self._entries[-1].tick if self._entries else 0

    def wake(self) -> None:
        """Wake every waiting stream so a cancelled one ends at once."""
        with self._changed:
            self._changed.notify_all()

    def close(self) -> None:
        """Wake every waiter; streams end when they see `closed`."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed
