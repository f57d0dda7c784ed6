"""QueryHistory's plain part: check the request, choose the tier, build the answer.

The tier is the finest one that reaches back to the range's start and answers it
within max_points; where none does (30 days asked in 2,000 points), the coarsest
that reaches back answers, its points merged k at a time (mean of means, max of
maxes) and the answer's step_ms says the merged step.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1.gpu_metrics import BY_FIELD, GPU_METRICS
from node_daemon.errors import Invalid
from node_daemon.history.store import HistoryDataLoss, HistoryStore, StoredPoint
from node_daemon.history.tiers import NAN, Layout, Tier

DEFAULT_MAX_POINTS = 2000
MAX_POINTS = 20_000
# Values (a mean and a max, 8 bytes each) one answer may carry: within the server's
# 16 MiB message limit with room for the rest. All 30-odd metrics of 8 GPUs at
# 20,000 points would be 80 MiB.
MAX_ANSWER_VALUES = 12 * 1024 * 1024 // 16
_EXAMPLES = "e.g. temp_gpu_c, util_gpu_pct, power_w, mem_used_bytes"


class BadHistoryQuery(Invalid):
    """The request is wrong whatever is stored (INVALID_ARGUMENT)."""


@dataclass(frozen=True)
class HistoryQuery:
    start_ms: int
    end_ms: int
    metrics: tuple[str, ...]
    gpus: tuple[int, ...]
    max_points: int


def parse_query(
    request: pb.QueryHistoryRequest, now_ms: int, node_gpus: Collection[int]
) -> HistoryQuery:
    """The request checked and completed (end 0: now; no metrics: all; no GPUs: the node's)."""
    end_ms = request.end_unix_ms or now_ms
    if request.start_unix_ms < 0:
        raise BadHistoryQuery(
            f"start_unix_ms must be a Unix time in ms, got {request.start_unix_ms}"
        )
    if request.start_unix_ms > end_ms:
        raise BadHistoryQuery(
            f"start_unix_ms {request.start_unix_ms} is after end_unix_ms {end_ms}: "
            "the range must start before it ends"
        )
    if request.max_points > MAX_POINTS:
        raise BadHistoryQuery(
            f"max_points {request.max_points} is more than {MAX_POINTS:,}, the most one answer "
            "holds; ask for fewer points (a coarser tier answers a long range)"
        )
    unknown = [m for m in request.metrics if m not in BY_FIELD]
    if unknown:
        raise BadHistoryQuery(
            f"unknown metric {unknown[0]!r}: not a field of the metric catalogue "
            f"(gpufleet.v1.gpu_metrics; {_EXAMPLES})"
        )
    absent = sorted(set(request.gpu_indices) - set(node_gpus))
    if absent:
        have = ", ".join(map(str, sorted(node_gpus))) or "none"
        raise BadHistoryQuery(f"GPU {absent[0]} is not on this node (its GPUs: {have})")
    metrics = tuple(dict.fromkeys(request.metrics)) or tuple(m.field for m in GPU_METRICS)
    gpus = tuple(dict.fromkeys(request.gpu_indices)) or tuple(sorted(node_gpus))
    return HistoryQuery(request.start_unix_ms, end_ms, metrics, gpus,
                        request.max_points or DEFAULT_MAX_POINTS)  # fmt: skip


def choose_tier(
    tiers: Sequence[Tier], oldest: Mapping[str, int | None], query: HistoryQuery
) -> Tier:
    """The finest tier that reaches `start` (or as far back as any tier reaches, within the
    coarsest step) and answers within max_points; else the coarsest that reaches back (its
    points are merged then); with nothing stored, the finest."""
    stored = [o for o in oldest.values() if o is not None]
    start = max(query.start_ms, min(stored)) if stored else query.start_ms
    slack = max(t.step_ms for t in tiers)
    reaching = [t for t in tiers if (o := oldest.get(t.name)) is not None and o <= start + slack]
    for tier in reaching:
        if (query.end_ms - start) // max(1, tier.step_ms) < query.max_points:
            return tier
    return reaching[-1] if reaching else tiers[0]  # nothing stored yet: the finest, empty


def tier_messages(tiers: Sequence[Tier], oldest: Mapping[str, int | None]) -> list[pb.HistoryTier]:
    messages = []
    for tier in tiers:
        message = pb.HistoryTier(name=tier.name, step_ms=tier.step_ms, retention_s=tier.retention_s)
        if oldest.get(tier.name) is not None:
            message.oldest_unix_ms = oldest[tier.name]  # type: ignore[assignment]
        messages.append(message)
    return messages


def answer_query(store: HistoryStore, query: HistoryQuery) -> pb.QueryHistoryResponse:
    oldest = store.oldest_ms()
    tier = choose_tier(store.tiers, oldest, query)
    read = store.read_points(tier, query.start_ms, query.end_ms)
    points = read.points
    if read.corrupt and not points:
        # Rows are there and none decodes: an empty OK answer would say nothing was kept.
        raise HistoryDataLoss(
            f"the metric history's {read.corrupt} {tier.name} rows in this range are damaged "
            f"and cannot be decoded ({read.reason}); other ranges are served"
        )
    merge = max(1, math.ceil(len(points) / query.max_points))
    timestamps = [p.timestamp_ms for p in points[::merge]]
    values = len(timestamps) * len(query.gpus) * len(query.metrics)
    if values > MAX_ANSWER_VALUES:
        raise BadHistoryQuery(
            f"the answer would hold {values:,} values ({len(timestamps):,} points of "
            f"{len(query.gpus)} GPUs x {len(query.metrics)} metrics), more than the "
            f"{MAX_ANSWER_VALUES:,} one answer carries: ask for fewer metrics or GPUs, or a "
            "smaller max_points"
        )
    response = pb.QueryHistoryResponse(
        tier=tier.name, step_ms=tier.step_ms * merge, timestamps_unix_ms=timestamps,
        tiers=tier_messages(store.tiers, oldest),
    )  # fmt: skip
    runs = [(layout, list(run)) for layout, run in itertools.groupby(points, _layout_of)]
    for gpu in query.gpus:
        for metric in query.metrics:
            means, maxes = _columns(runs, gpu, metric)
            if merge > 1:
                means, maxes = _merged(means, maxes, merge)
            response.series.add(gpu_index=gpu, metric=metric, values=means, max_values=maxes)
    return response


def _layout_of(point: StoredPoint) -> Layout:
    return point.layout


Runs = Sequence[tuple[Layout, Sequence[StoredPoint]]]


def _columns(runs: Runs, gpu: int, metric: str) -> tuple[list[float], list[float]]:
    """One value's means and maxes, a point each: NaN where its layout lacks it. Points
    come in runs of one layout (a layout changes when a GPU or a metric comes or goes),
    so the value's place is looked up once a run, not once a point."""
    means: list[float] = []
    maxes: list[float] = []
    for layout, points in runs:
        i = layout.position(gpu, metric)
        if i is None:
            means.extend([NAN] * len(points))
            maxes.extend([NAN] * len(points))
        else:
            means.extend([p.means[i] for p in points])
            maxes.extend([p.maxes[i] for p in points])
    return means, maxes


def _merged(means: list[float], maxes: list[float], k: int) -> tuple[list[float], list[float]]:
    """Every k points as one: the mean of the means and the max of the maxes that are not
    NaN (a GPU that did not report)."""
    merged_means: list[float] = []
    merged_maxes: list[float] = []
    for at in range(0, len(means), k):
        reported = [m for m in means[at : at + k] if m == m]  # m == m: not NaN
        peaks = [x for x in maxes[at : at + k] if x == x]
        merged_means.append(sum(reported) / len(reported) if reported else NAN)
        merged_maxes.append(max(peaks) if peaks else NAN)
    return merged_means, merged_maxes
