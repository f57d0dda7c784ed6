"""How a simulated process's GPU memory moves over time: the shapes a leak detector meets.

Each pattern gives the memory a process holds `elapsed_s` after it started, so
the model stays deterministic at any step size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

MIB = 1024**2


class MemoryPattern(Protocol):
    def bytes_at(self, elapsed_s: float) -> float:
        """Bytes the process holds `elapsed_s` seconds after it started."""
        ...


@dataclass(frozen=True)
class Flat:
    """A process that allocates once and keeps it (the common case)."""

    held: float

    def bytes_at(self, elapsed_s: float) -> float:
        return self.held


@dataclass(frozen=True)
class Leak:
    """Memory that only grows, at a steady rate: an unbounded cache, a tensor list."""

    start: float
    bytes_per_s: float

    def bytes_at(self, elapsed_s: float) -> float:
        return self.start + self.bytes_per_s * elapsed_s


@dataclass(frozen=True)
class WeightLoad:
    """A model server loading its weights shard by shard, then holding them: not a leak."""

    total: float
    shards: int = 8
    shard_s: float = 5.0  # a shard every 5 s: 8 shards of 2.5 GiB at ~500 MB/s from NVMe

    def bytes_at(self, elapsed_s: float) -> float:
        loaded = min(self.shards, math.floor(elapsed_s / self.shard_s) + 1)
        return self.total * loaded / self.shards


@dataclass(frozen=True)
class Sawtooth:
    """Allocates steadily up to a peak, then frees it all: batches, caches emptied."""

    base: float
    peak: float
    period_s: float

    def bytes_at(self, elapsed_s: float) -> float:
        phase = (elapsed_s % self.period_s) / self.period_s
        return self.base + (self.peak - self.base) * phase
