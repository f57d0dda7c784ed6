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
        Tier(1, "10s", 10_000, settings.ten_second_retention_s),
        Tier(2, "1m", 60_000, settings.minute_retention_s),
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
    """One tick or step: `means` (a tick's values), `maxes`, `counts` (a step's ticks with a
    value, per value; empty for a tick)."""

    timestamp_ms: int
    layout: Layout
    means: list[float]
    maxes: list[float]
    counts: list[int]

    @classmethod
    def tick(cls, timestamp_ms: int, layout: Layout, values: list[float]) -> Point:
        # A tick's max is its value; its counts (one where not NaN) are folded from it.
        return cls(timestamp_ms, layout, values, values, [])


class StepAccumulator:
    """Folds finer points into `step_ms` steps; `add` returns the steps it closed.

    A step's points are kept until it closes and folded then column by column: a
    Python loop per value per tick cost 4 times as much (bench/history_disk.py).
    """

    def __init__(self, step_ms: int) -> None:
        self.step_ms = step_ms
        self._start: int | None = None
        self._points: list[Point] = []

    def add(self, point: Point) -> list[Point]:
        start = point.timestamp_ms - point.timestamp_ms % self.step_ms
        closed = []
        if self._points and (start != self._start or point.layout != self._points[0].layout):
            closed.append(self._close())
        self._start = start
        self._points.append(point)
        return closed

    def _close(self) -> Point:
        assert self._start is not None
        points, self._points = self._points, []
        if all(p.maxes is p.means for p in points):
            means, maxes, counts = _fold_ticks(points)
        else:
            means, maxes, counts = _fold_steps(points)
        return Point(self._start, points[0].layout, means, maxes, counts)


Folded = tuple[list[float], list[float], list[int]]


def _fold_ticks(ticks: list[Point]) -> Folded:
    """Raw ticks: each value counts once where it is not NaN."""
    means, maxes, counts = [], [], []
    for column in zip(*(t.means for t in ticks), strict=True):
        reported = [v for v in column if v == v]  # v == v: not NaN
        if reported:
            means.append(sum(reported) / len(reported))
            maxes.append(max(reported))
        else:
            means.append(NAN)
            maxes.append(NAN)
        counts.append(len(reported))
    return means, maxes, counts


def _fold_steps(steps: list[Point]) -> Folded:
    """Finer steps: each mean weighed by its ticks, the max of the maxes."""
    means, maxes, counts = [], [], []
    columns = zip(
        zip(*(p.means for p in steps), strict=True),
        zip(*(p.maxes for p in steps), strict=True),
        zip(*(p.counts for p in steps), strict=True),
        strict=True,
    )
    for step_means, step_maxes, step_counts in columns:
        count = sum(step_counts)
        if count:
            weighed = (m * c for m, c in zip(step_means, step_counts, strict=True) if c)
            means.append(sum(weighed) / count)
            maxes.append(max(x for x, c in zip(step_maxes, step_counts, strict=True) if c))
        else:
            means.append(NAN)
            maxes.append(NAN)
        counts.append(count)
    return means, maxes, counts


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
