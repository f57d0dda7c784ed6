"""The history's tiers and the downsampling between them.

A point holds one value per (GPU, metric) of its layout, flattened GPU-major. A
downsampled point keeps, per value, the mean and the max over its step, and (in
memory only) how many ticks had a value, so that a coarser step built from finer
ones weighs each by its ticks and a GPU that did not report stays NaN.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from node_daemon.history.settings import HistorySettings

NAN = math.nan


@dataclass(frozen=True)
class Tier:
    """One resolution of the history. `step_ms` 0: every tick (raw)."""

    id: int
    name: str
    step_ms: int
    retention_s: int


def tiers_of(settings: HistorySettings) -> tuple[Tier, Tier, Tier]:
    """raw, 10s and 1m, finest first."""
    return (
        Tier(0, "raw", 0, settings.raw_retention_s),
        Tier(1, "10s", 10_000, settings.tier_10s_retention_s),
        Tier(2, "1m", 60_000, settings.tier_1m_retention_s),
    )


@dataclass(frozen=True)
class Layout:
    """Which GPUs and metrics a point's values are, in order: the catalogue may grow and
    GPUs come and go, and a row written under an older layout still reads."""

    gpus: tuple[int, ...]
    metrics: tuple[str, ...]

    def position(self, gpu: int, metric: str) -> int | None:
        """The value's place in a point of this layout; None where it has none."""
        return self._positions.get((gpu, metric))

    @functools.cached_property
    def _positions(self) -> dict[tuple[int, str], int]:
        pairs = ((g, m) for g in self.gpus for m in self.metrics)
        return {pair: i for i, pair in enumerate(pairs)}


@dataclass
class Point:
    """One tick or step: `means` (a tick's values), `maxes`, `counts` (ticks with a value)."""

    timestamp_ms: int
    layout: Layout
    means: list[float]
    maxes: list[float]
    counts: list[int]

    @classmethod
    def tick(cls, timestamp_ms: int, layout: Layout, values: list[float]) -> Point:
        counts = [0 if v != v else 1 for v in values]  # v != v: NaN, not reported
        return cls(timestamp_ms, layout, values, values, counts)


class StepAccumulator:
    """Folds finer points into `step_ms` steps; `add` returns the steps it closed."""

    def __init__(self, step_ms: int) -> None:
        self.step_ms = step_ms
        self._start: int | None = None
        self._layout: Layout | None = None
        self._sums: list[float] = []
        self._maxes: list[float] = []
        self._counts: list[int] = []

    def add(self, point: Point) -> list[Point]:
        start = point.timestamp_ms - point.timestamp_ms % self.step_ms
        closed = []
        if self._start is not None and (start != self._start or point.layout != self._layout):
            closed.append(self._close())
        if self._start is None:
            size = len(point.means)
            self._start, self._layout = start, point.layout
            self._sums, self._maxes, self._counts = [0.0] * size, [-math.inf] * size, [0] * size
        self._fold(point)
        return closed

    def _fold(self, point: Point) -> None:
        sums, maxes, counts = self._sums, self._maxes, self._counts
        for i, count in enumerate(point.counts):
            if count:
                sums[i] += point.means[i] * count
                counts[i] += count
                if point.maxes[i] > maxes[i]:
                    maxes[i] = point.maxes[i]

    def _close(self) -> Point:
        assert self._start is not None and self._layout is not None
        counts = self._counts
        means = [s / c if c else NAN for s, c in zip(self._sums, counts, strict=True)]
        maxes = [m if c else NAN for m, c in zip(self._maxes, counts, strict=True)]
        point = Point(self._start, self._layout, means, maxes, counts)
        self._start = self._layout = None
        return point


class Downsampler:
    """Raw ticks in; the rows of every tier out: the tick itself, then each step it closed.

    The 1 min steps fold the closed 10 s steps (weighted by their ticks), so a tick is
    folded once per tier above raw, not once per tier from scratch.
    """

    def __init__(self, tiers: tuple[Tier, Tier, Tier]) -> None:
        raw, ten, minute = tiers
        self._raw, self._ten, self._minute = raw, ten, minute
        self._ten_steps = StepAccumulator(ten.step_ms)
        self._minute_steps = StepAccumulator(minute.step_ms)

    def add(self, tick: Point) -> list[tuple[Tier, Point]]:
        rows = [(self._raw, tick)]
        for ten in self._ten_steps.add(tick):
            rows.append((self._ten, ten))
            rows.extend((self._minute, m) for m in self._minute_steps.add(ten))
        return rows
