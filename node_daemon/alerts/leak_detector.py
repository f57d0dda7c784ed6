"""The memory leak rule: a process's GPU memory growing for long, on idle and busy GPUs alike.

A leak is growth that lasts. A model loading its weights is a step that stops; a
workload that allocates and frees is a sawtooth whose lows stay put. So each
process keeps a downsampled series (one point per `bucket_s`: the lowest memory
seen in it, over `history_s`; bounded, whatever the tick) and judges its lower
envelope, where frees neither hide a trend nor do temporary peaks make one. A
span of the series (the last `min_duration_s`, twice that, ..., all of it) is a
leak when its growth is:

- fast enough: a robust (Theil-Sen) slope of at least `min_rate_mib_per_min`;
- big enough: that slope over the span at least `min_growth_mib`;
- sustained: each third of the span rises at no less than half the minimum rate
  by its own slope, and each third's lowest point lies above the one before it (a
  step lies in one third only);
- not slowing down: the last third rises at least half as fast as the whole span
  (an allocator's cache warming up to a plateau slows down; a leak does not);
- steady: at least `steady_fraction` of bucket-to-bucket steps do not fall, and
  the lows never give back more than a quarter of the span's growth (a sawtooth
  slower than a bucket falls by all it grew, however few its falling steps);
- new: the last third reaches above every point before the span (memory that was
  given back before is an allocation cycle, not a leak).

Once found, a leak holds while the last `min_duration_s` still rise (at half the
minimum rate, and at a third of the rate it was found at) and it has given back
at most half of what it grew. Its alert says the rate and
when the GPU is full at that rate (its free memory over the rate: the lead time);
it is critical when that is under `critical_within_s`.
"""

from __future__ import annotations

import itertools
import statistics
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from gpufleet.v1.alert_severity import Severity
from gpufleet.v1.gpu_metrics import MEM_TOTAL_BYTES, MEM_USED_BYTES
from node_daemon.alerts.findings import Finding, GpuTick
from node_daemon.alerts.rules import LeakSettings
from node_daemon.backends.readings import ProcessReading

MIB = 1024**2
Point = tuple[float, int]  # (bucket start s, lowest memory in the bucket, bytes)


@dataclass(frozen=True)
class Trend:
    """Growth judged a leak: since when, from how low, how fast."""

    start_s: float
    low_b: int
    rate_b_per_s: float  # now, over the last min_duration_s once found
    judged_b_per_s: float  # when last judged a leak over a whole span


@dataclass
class _Series:
    """One process's lower envelope: closed buckets, and the bucket filling now."""

    started_ms: int | None  # the process's start time: a reused pid is a new process
    bucket_start_s: float
    bucket_low_b: int
    points: deque[Point] = field(default_factory=deque)
    leak: Trend | None = None
    severity: Severity = Severity.WARNING  # the worst of this leak's life: no flapping


def theil_sen(points: Sequence[Point]) -> float:
    """The median of the slopes between every two points (bytes/s): robust to outliers."""
    slopes = [(b - a) / (tb - ta) for (ta, a), (tb, b) in itertools.combinations(points, 2)
              if tb > ta]  # fmt: skip
    return statistics.median(slopes) if slopes else 0.0


def _thirds(points: Sequence[Point]) -> tuple[Sequence[Point], Sequence[Point], Sequence[Point]]:
    n = len(points)
    return points[: n // 3], points[n // 3 : 2 * n // 3], points[2 * n // 3 :]


def _steady(points: Sequence[Point], fraction: float) -> bool:
    steps = list(itertools.pairwise(low for _, low in points))
    return sum(b >= a for a, b in steps) >= fraction * len(steps)


def _drawdown(points: Sequence[Point]) -> int:
    """The most the lows fell below an earlier low within `points` (bytes)."""
    highest, deepest = points[0][1], 0
    for _, low in points:
        highest = max(highest, low)
        deepest = max(deepest, highest - low)
    return deepest


def _sustained(points: Sequence[Point], min_rate: float) -> bool:
    thirds = _thirds(points)
    first, middle, last = (min(low for _, low in third) for third in thirds)
    return first < middle < last and all(theil_sen(t) >= min_rate / 2 for t in thirds)


class LeakDetector:
    """A process whose GPU memory grows for long enough, fast enough, whatever else the GPU does."""

    rule = "memory_leak"

    def __init__(self, settings: LeakSettings) -> None:
        self._settings = settings
        self._series: dict[tuple[int, int], _Series] = {}

    def evaluate(self, gpu: GpuTick) -> Iterator[Finding]:
        present = set()
        if self._settings.enabled:
            for process in gpu.processes:
                if process.gpu_memory_bytes is None:
                    continue
                present.add(process.pid)
                series = self._track(gpu, process, process.gpu_memory_bytes)
                if series.leak is not None:
                    yield self._finding(gpu, process, series)
        for key in [k for k in self._series if k[0] == gpu.index and k[1] not in present]:
            del self._series[key]

    def _track(self, gpu: GpuTick, process: ProcessReading, memory: int) -> _Series:
        key, now = (gpu.index, process.pid), gpu.now_s
        series = self._series.get(key)
        started = process.start_time_unix_ms
        if series is None or _another_process(series, started):
            series = self._series[key] = _Series(started, now, memory)
        elif now - series.bucket_start_s >= self._settings.bucket_s:
            series.points.append((series.bucket_start_s, series.bucket_low_b))
            series.bucket_start_s, series.bucket_low_b = now, memory
            while series.points and series.points[0][0] < now - self._settings.history_s:
                series.points.popleft()
            self._judge(series)
        else:
            series.bucket_low_b = min(series.bucket_low_b, memory)
        return series

    def _judge(self, series: _Series) -> None:
        points = list(series.points)
        found = self._longest_leak(points)
        leak = series.leak
        if found is None and leak is not None and self._holds(leak, points):
            rate = theil_sen(self._recent(points))
            found = Trend(leak.start_s, leak.low_b, rate, leak.judged_b_per_s)
        elif found is not None and leak is not None:
            found = Trend(min(found.start_s, leak.start_s), leak.low_b, found.rate_b_per_s,
                          found.rate_b_per_s)  # fmt: skip
        if found is None:
            series.severity = Severity.WARNING
        series.leak = found

    def _longest_leak(self, points: list[Point]) -> Trend | None:
        """The longest span ending now that is a leak: the last min_duration_s, twice it, ..."""
        if not points or points[-1][0] - points[0][0] < self._settings.min_duration_s:
            return None
        spans, span = [], self._settings.min_duration_s
        while span < points[-1][0] - points[0][0]:
            spans.append(span)
            span *= 2
        for span in [points[-1][0] - points[0][0], *reversed(spans)]:
            start = next(i for i, (t, _) in enumerate(points) if t >= points[-1][0] - span)
            before = max((low for _, low in points[:start]), default=None)
            if (trend := self._leak_in(points[start:], before)) is not None:
                return trend
        return None

    def _leak_in(self, points: Sequence[Point], before: int | None) -> Trend | None:
        """A Trend if `points` grow as a leak does; `before`: the highest low before them.
        The cheap tests run first: most processes hold their memory flat."""
        settings = self._settings
        min_rate = settings.min_rate_mib_per_min * MIB / 60
        if len(points) < 6 or not _steady(points, settings.steady_fraction):
            return None
        lows = [low for _, low in points]
        if _drawdown(points) > (max(lows) - min(lows)) / 4:
            return None  # it gave back much of what it took: an allocation cycle
        if before is not None and max(low for _, low in _thirds(points)[2]) <= before:
            return None
        if not _sustained(points, min_rate):
            return None
        rate, span = theil_sen(points), points[-1][0] - points[0][0]
        if rate < min_rate or rate * span < settings.min_growth_mib * MIB:
            return None
        if theil_sen(_thirds(points)[2]) < rate / 2:
            return None  # slowing down: a cache warming up to its plateau
        return Trend(points[0][0], points[0][1], rate, rate)

    def _recent(self, points: list[Point]) -> list[Point]:
        since = points[-1][0] - self._settings.min_duration_s
        return [p for p in points if p[0] >= since]

    def _holds(self, leak: Trend, points: list[Point]) -> bool:
        """A leak goes on while it still rises (at half the minimum rate, and a third of
        the rate it was found at) and has given back at most half its growth."""
        floor = max(self._settings.min_rate_mib_per_min * MIB / 60 / 2, leak.judged_b_per_s / 3)
        highest = max(low for t, low in points if t >= leak.start_s)
        kept = points[-1][1] - leak.low_b >= (highest - leak.low_b) / 2
        return kept and theil_sen(self._recent(points)) >= floor

    def _finding(self, gpu: GpuTick, process: ProcessReading, series: _Series) -> Finding:
        leak = series.leak
        assert leak is not None
        rate_mib_min = leak.rate_b_per_s * 60 / MIB
        free = _free_bytes(gpu)
        eta_s = None if free is None else max(0.0, free / leak.rate_b_per_s)
        if eta_s is not None and eta_s < self._settings.critical_within_s:
            series.severity = Severity.CRITICAL
        who = f"{process.user or '?'}: {(process.command or '?')[:60]}"
        grown = max(0, (process.gpu_memory_bytes or leak.low_b) - leak.low_b)
        summary = (
            f"GPU {gpu.index}: process {process.pid} ({who}) has been leaking "
            f"GPU memory for {_duration(gpu.now_s - leak.start_s)} ({_size(grown)}); "
            f"{_outlook(gpu.index, rate_mib_min, eta_s)}"
        )
        return Finding.on_gpu(
            self.rule, series.severity, gpu.index, round(rate_mib_min, 1), "MiB/min", summary,
            pid=process.pid,
        )  # fmt: skip


def _another_process(series: _Series, started_ms: int | None) -> bool:
    """The pid was reused: the process now under it started at another time."""
    return None not in (started_ms, series.started_ms) and started_ms != series.started_ms


def _free_bytes(gpu: GpuTick) -> int | None:
    used = gpu.reading[MEM_USED_BYTES]
    total = gpu.reading[MEM_TOTAL_BYTES]
    if total is None and gpu.static is not None:
        total = gpu.static.memory_total_bytes
    return None if used is None or total is None else max(0, total - used)


def _outlook(index: int, rate_mib_min: float, eta_s: float | None) -> str:
    rate = f"{rate_mib_min:,.0f} MiB/min"
    if eta_s is None:
        return f"at {rate}; GPU {index}'s free memory is unknown"
    if eta_s < 60:
        return f"at {rate} GPU {index} is full now"
    return f"at {rate} GPU {index} is full in {_duration(eta_s)}"


def _duration(seconds: float) -> str:
    """ "47 min", "3 h 5 min": as a person says it."""
    minutes = max(1, round(seconds / 60))
    return f"{minutes} min" if minutes < 120 else f"{minutes // 60} h {minutes % 60} min"


def _size(grown_b: int) -> str:
    mib = grown_b / MIB
    return f"+{mib / 1024:.1f} GiB" if mib >= 1024 else f"+{mib:,.0f} MiB"
