"""History older than the console's ring: who answers a range, and one curve from two parts.

The ring holds the last ~17 minutes at full rate. A range that starts before
it is drawn from a fetched slice (the node daemon's on-disk tiers, or a
Prometheus-compatible store) up to where the ring begins, then the ring: no
point twice, and a NaN (a gap in the curve) wherever neither had data. No Qt
and no protobuf: the connection layer decodes answers into `HistorySlice`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

DAEMON: Final = "daemon"
PROMETHEUS: Final = "prometheus"
# At most this many points a series: a 24 h range gives 1 min steps (Prometheus) or the
# daemon's tier that keeps within it. More points than pixels would only cost paint time.
MAX_POINTS: Final = 2000
# Steps Prometheus is asked for: the smallest that keeps a range within MAX_POINTS.
NICE_STEPS_S: Final = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600)
# A source "reaches" a range that starts this close after its oldest point.
REACH_SLACK_S: Final = 60.0


@dataclass(frozen=True)
class TierReach:
    """One of a daemon's history tiers (Inventory.history_tiers, QueryHistoryResponse.tiers)."""

    name: str  # "raw", "10s", "1m"
    step_s: float
    retention_s: float
    oldest_s: float | None  # the oldest point it holds now; None while empty


@dataclass(frozen=True)
class HistorySlice:
    """A fetched stretch of one GPU's plotted metrics, in their shown units, oldest first.

    `means` and `peaks` are keyed by catalogue field (`GpuMetric.field`); a peak is
    the largest value within its step (equal to the mean at full resolution).
    """

    source: str  # DAEMON or PROMETHEUS
    step_s: float
    start_s: float  # the range asked for
    end_s: float
    times: FloatArray
    means: Mapping[str, FloatArray]
    peaks: Mapping[str, FloatArray]
    tier: str = ""  # the daemon's tier that answered
    tiers: tuple[TierReach, ...] = ()  # the daemon's tiers as it answered
    oldest_s: float | None = None  # how far back the source reaches; None: unknown

    def covers(self, start_s: float, end_s: float) -> bool:
        """Was this slice asked for at least [start, end] (what it holds may start later)?"""
        return self.start_s <= start_s + self.step_s and self.end_s >= end_s - self.step_s


@dataclass(frozen=True)
class Curve:
    """What one plot draws: the merged means, and the peaks where they differ (downsampled)."""

    times: FloatArray
    values: FloatArray
    peak_times: FloatArray = field(default_factory=lambda: np.empty(0))
    peak_values: FloatArray = field(default_factory=lambda: np.empty(0))


def prometheus_step_s(span_s: float, max_points: int = MAX_POINTS) -> float:
    """The smallest nice step that shows `span_s` in at most `max_points` points."""
    wanted = span_s / max_points
    return float(next((s for s in NICE_STEPS_S if s >= wanted), math.ceil(wanted)))


def daemon_oldest_s(tiers: tuple[TierReach, ...]) -> float | None:
    """How far back a daemon's history reaches now (its longest-kept tier's oldest point)."""
    found = [t.oldest_s for t in tiers if t.oldest_s is not None]
    return min(found) if found else None


def choose_source(start_s: float, tiers: tuple[TierReach, ...], prometheus: bool) -> str | None:
    """Who answers a range from `start_s`: the daemon while its tiers reach back that far,
    Prometheus for older ranges or a daemon without history, else whichever holds some."""
    oldest = daemon_oldest_s(tiers)
    if oldest is not None and oldest <= start_s + REACH_SLACK_S:
        return DAEMON
    if prometheus:
        return PROMETHEUS
    return DAEMON if tiers else None


def merge(
    history: HistorySlice | None, metric_field: str, ring_times: FloatArray, ring_values: FloatArray
) -> Curve:
    """The fetched part before the ring's first sample, then the ring; NaN across no data."""
    if history is None or not len(history.times) or metric_field not in history.means:
        return Curve(ring_times, ring_values)
    finite = ring_times[np.isfinite(ring_times)]
    cut = float(finite[0]) if len(finite) else math.inf
    keep = history.times < cut
    times, means = history.times[keep], history.means[metric_field][keep]
    peaks = history.peaks.get(metric_field, means)[keep] if history.peaks else means
    times, means, peaks = _with_gaps(times, history.step_s, means, peaks)
    if len(times) and len(finite) and cut - times[-1] > 2.5 * history.step_s:
        # Nothing between the slice's last point and the ring's first: a gap, not a line.
        times = np.append(times, times[-1] + history.step_s)
        means, peaks = np.append(means, np.nan), np.append(peaks, np.nan)
    downsampled = history.step_s > 1.5 and not np.array_equal(means, peaks, equal_nan=True)
    return Curve(
        np.concatenate((times, ring_times)), np.concatenate((means, ring_values)),
        times if downsampled else np.empty(0), peaks if downsampled else np.empty(0),
    )  # fmt: skip


def _with_gaps(times: FloatArray, step_s: float, *columns: FloatArray) -> tuple[FloatArray, ...]:
    """Insert a NaN row after each point followed by more than 1.5 steps of nothing."""
    if len(times) < 2:
        return (times, *columns)
    after = np.flatnonzero(np.diff(times) > 1.5 * step_s) + 1
    if not len(after):
        return (times, *columns)
    gap_times = times[after - 1] + step_s
    return (
        np.insert(times, after, gap_times),
        *(np.insert(c, after, np.nan) for c in columns),
    )


def step_words(step_s: float) -> str:
    """'1 s', '10 s', '1 min', '2 h': a step as a person says it."""
    if step_s < 60:
        return f"{step_s:g} s"
    if step_s < 3600:
        return f"{step_s / 60:g} min"
    return f"{step_s / 3600:g} h"


def _when(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).astimezone().strftime("%Y-%m-%d %H:%M")


def source_note(history: HistorySlice, start_s: float, node: str) -> str:
    """Where the older part came from and its resolution; where no history reaches."""
    source = "Prometheus" if history.source == PROMETHEUS else f"{node}'s history"
    words = f"{step_words(history.step_s)} steps from {source}"
    held = history.times[np.isfinite(history.times)]
    first = float(held[0]) if len(held) else None
    reach = history.oldest_s if history.oldest_s is not None else first
    if reach is None or first is None:
        return f"no history before the console's last minutes ({source} holds none)"
    if reach > start_s + max(REACH_SLACK_S, 2 * history.step_s):
        return f"{words}; no history before {_when(reach)}"
    return words
