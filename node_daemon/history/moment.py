"""The node's readings at one moment, from the finest history tier that holds it.

The tier is the finest whose oldest point is at or before the moment (as QueryHistory
chooses for a range that starts there). Within it each GPU's point is the newest at or
before the moment, and only when it is near: within NEAR_STEPS steps of the tier (at
least MIN_NEAR_MS). Further back the node was not sampling then (stopped, the GPU not
there) and the GPU's readings are absent, never 0; a value the GPU did not report
(NaN on disk) is absent too.

The newest point at or before the moment, not the nearest either side: what the node
knew at that moment, as the journal's part of the answer is what it had recorded by then.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from node_daemon.history.store import HistoryDataLoss, HistoryStore, StoredPoint
from node_daemon.history.tiers import Tier

NEAR_STEPS = 2
MIN_NEAR_MS = 2000


@dataclass(frozen=True)
class GpuPoint:
    """One GPU's values at the moment: by catalogue field, NaNs left out."""

    timestamp_ms: int
    means: Mapping[str, float]
    maxes: Mapping[str, float]


@dataclass(frozen=True)
class ReadingsAt:
    """The tier that answered (None: none holds the moment) and each GPU's point near it."""

    tier: Tier | None
    oldest: Mapping[str, int | None]
    gpus: dict[int, GpuPoint] = field(default_factory=dict)
    layout_gpus: frozenset[int] = frozenset()
    corrupt: int = 0
    reason: str | None = None


def tier_holding(
    tiers: tuple[Tier, ...], oldest: Mapping[str, int | None], at_ms: int
) -> Tier | None:
    """The finest tier whose oldest point is at or before `at_ms`; None where none is."""
    for tier in tiers:
        first = oldest.get(tier.name)
        if first is not None and first <= at_ms:
            return tier
    return None


def near_ms(tier: Tier) -> int:
    return max(NEAR_STEPS * tier.step_ms, MIN_NEAR_MS)


def readings_at(store: HistoryStore, at_ms: int) -> ReadingsAt:
    """Each GPU's point at `at_ms` (see the module).

    Raises:
        HistoryDataLoss: rows are stored near the moment and none decodes (as QueryHistory).
        HistoryStoreError: the file could not be read.
    """
    oldest = store.oldest_ms()
    tier = tier_holding(store.tiers, oldest, at_ms)
    if tier is None:
        return ReadingsAt(None, oldest)
    read = store.read_points(tier, at_ms - near_ms(tier), at_ms)
    if read.corrupt and not read.points:
        raise HistoryDataLoss(
            f"the metric history's {read.corrupt} {tier.name} rows near this moment are "
            f"damaged and cannot be decoded ({read.reason}); other moments are served"
        )
    gpus: dict[int, GpuPoint] = {}
    for point in reversed(read.points):  # newest first: each GPU's newest point wins
        for gpu in point.layout.gpus:
            if gpu not in gpus:
                gpus[gpu] = _gpu_point(point, gpu)
    layout_gpus = frozenset(g for p in read.points for g in p.layout.gpus)
    return ReadingsAt(tier, oldest, gpus, layout_gpus, read.corrupt, read.reason)


def _gpu_point(point: StoredPoint, gpu: int) -> GpuPoint:
    means: dict[str, float] = {}
    maxes: dict[str, float] = {}
    for metric in point.layout.metrics:
        i = point.layout.position(gpu, metric)
        if i is None:
            continue
        if (mean := point.means[i]) == mean:  # not NaN: the GPU reported it
            means[metric] = mean
        if (peak := point.maxes[i]) == peak:
            maxes[metric] = peak
    return GpuPoint(point.timestamp_ms, means, maxes)
