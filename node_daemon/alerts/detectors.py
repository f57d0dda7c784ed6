"""Detectors: each judges one kind of trouble on one GPU per tick.

A detector is stateful per GPU (durations, hysteresis, windows) and yields a
Finding for each condition that holds now; the engine turns findings into
alerts. None in a reading means "not available" and never triggers a rule.
"""

from __future__ import annotations

import math
from collections import defaultdict, deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from gpufleet.v1.alert_severity import Severity
from gpufleet.v1.gpu_metrics import (
    ECC_CORRECTED_TOTAL,
    ECC_UNCORRECTED_TOTAL,
    POWER_W,
    TEMP_GPU_C,
    THROTTLE_REASONS,
    UTIL_GPU_PCT,
    GpuMetric,
)
from gpufleet.v1.throttle_reasons import SLOWING, reason_words
from node_daemon.alerts.findings import Finding, Gate, GpuTick
from node_daemon.alerts.rules import (
    EccSettings,
    IdleSettings,
    PowerSettings,
    ThresholdSettings,
    ThrottleSettings,
    TrendSettings,
)
from node_daemon.alerts.wording import counted
from node_daemon.backends.readings import GpuHealth

MIB = 1024**2

S = TypeVar("S")


@dataclass
class _LevelState:
    level: Severity | None = None
    gates: dict[Severity, Gate] = field(default_factory=lambda: defaultdict(Gate))


class ThresholdDetector:
    """Warning and critical lines with a duration each, and hysteresis on the way down."""

    def __init__(
        self,
        rule: str,
        label: str,
        settings: ThresholdSettings,
        metric: GpuMetric[float],
    ) -> None:
        self.rule, self._label, self._settings = rule, label, settings
        self._metric, self._unit = metric, metric.unit
        self._state: dict[int, _LevelState] = defaultdict(_LevelState)

    def evaluate(self, gpu: GpuTick) -> Iterator[Finding]:
        state = self._state[gpu.index]
        value = gpu.reading[self._metric]
        if value is None or not self._settings.enabled:
            self._state.pop(gpu.index, None)
            return
        settings = self._settings.for_model(gpu.model)
        state.level = self._level(gpu.now_s, value, settings, state)
        if state.level is not None:
            line = settings.critical if state.level is Severity.CRITICAL else settings.warning
            summary = (
                f"GPU {gpu.index} {self._label} {value:.0f} {self._unit} "
                f"({state.level.label} at {line:.0f} {self._unit})"
            )
            yield Finding.on_gpu(self.rule, state.level, gpu.index, value, self._unit, summary)

    @staticmethod
    def _level(
        now_s: float, value: float, settings: ThresholdSettings, state: _LevelState
    ) -> Severity | None:
        levels = (
            (Severity.CRITICAL, settings.critical, settings.critical_for_s),
            (Severity.WARNING, settings.warning, settings.warning_for_s),
        )
        for severity, line, for_s in levels:
            if line is None:
                continue
            held = state.gates[severity].held_for(now_s, value >= line)
            if held >= for_s:
                return severity
            holding = state.level is not None and state.level >= severity
            if holding and value >= line - settings.hysteresis:
                return severity  # hysteresis: clears only a few units below the line
        return None


class _GatedDetector(Generic[S]):
    """A detector whose condition counts once it has held a while on a GPU (a gate each)."""

    def __init__(self, settings: S) -> None:
        self._settings = settings
        self._gates: dict[int, Gate] = defaultdict(Gate)

    def _held_for(self, gpu: GpuTick, holds: bool) -> float:
        """Seconds the condition has held on this GPU up to this tick; -1 when it does not hold."""
        return self._gates[gpu.index].held_for(gpu.now_s, holds)


class PowerDetector(_GatedDetector[PowerSettings]):
    rule = "power"

    def evaluate(self, gpu: GpuTick) -> Iterator[Finding]:
        power, limit = gpu.reading[POWER_W], gpu.static.power_limit_w if gpu.static else None
        over = power is not None and limit is not None and power >= limit * self._settings.ratio
        if self._settings.enabled and self._held_for(gpu, over) >= self._settings.for_s:
            summary = f"GPU {gpu.index} draws {power:.0f} W, at or above its {limit:.0f} W limit"
            yield Finding.on_gpu(self.rule, Severity.WARNING, gpu.index, power, "W", summary)


class ThrottleDetector(_GatedDetector[ThrottleSettings]):
    rule = "throttle"

    def evaluate(self, gpu: GpuTick) -> Iterator[Finding]:
        reasons = gpu.reading[THROTTLE_REASONS] or 0
        names = reason_words(reasons, SLOWING)
        held = self._held_for(gpu, bool(names))
        if self._settings.enabled and held >= self._settings.for_s:
            summary = f"GPU {gpu.index} throttled: {', '.join(names)}"
            # No value: the reasons are in the summary.
            yield Finding.on_gpu(self.rule, Severity.WARNING, gpu.index, None, "", summary)


class EccDetector:
    """Uncorrectable errors page at once; correctable ones warn above a rate."""

    def __init__(self, settings: EccSettings) -> None:
        self._settings = settings
        self._corrected: dict[int, deque[tuple[float, int]]] = defaultdict(deque)

    def evaluate(self, gpu: GpuTick) -> Iterator[Finding]:
        if not self._settings.enabled:
            return
        uncorrected = gpu.reading[ECC_UNCORRECTED_TOTAL]
        if uncorrected:
            summary = (
                f"GPU {gpu.index}: {counted(uncorrected, 'uncorrectable ECC error')} "
                "since the driver loaded"
            )
            yield Finding.on_gpu(
                "ecc_uncorrectable", Severity.CRITICAL, gpu.index, float(uncorrected), "errors",
                summary,
            )  # fmt: skip
        recent = self._recent_corrected(gpu)
        if recent >= self._settings.correctable_threshold:
            minutes = self._settings.correctable_window_s / 60
            summary = (
                f"GPU {gpu.index}: {counted(recent, 'correctable ECC error')} "
                f"in the last {minutes:.0f} min"
            )
            yield Finding.on_gpu(
                "ecc_correctable", Severity.WARNING, gpu.index, float(recent), "errors", summary
            )

    def _recent_corrected(self, gpu: GpuTick) -> int:
        total = gpu.reading[ECC_CORRECTED_TOTAL]
        window = self._corrected[gpu.index]
        if total is None:
            window.clear()
            return 0
        window.append((gpu.now_s, total))
        while window and window[0][0] < gpu.now_s - self._settings.correctable_window_s:
            window.popleft()
        return total - window[0][1]


class LostDetector:
    rule = "gpu_lost"

    def evaluate(self, gpu: GpuTick) -> Iterator[Finding]:
        if gpu.reading.health is GpuHealth.LOST:
            summary = f"GPU {gpu.index} is lost: {gpu.reading.error or 'fell off the bus'}"
            yield Finding.on_gpu(self.rule, Severity.CRITICAL, gpu.index, None, "", summary)


class IdleDetector(_GatedDetector[IdleSettings]):
    """Waste: a GPU that processes hold but do not use."""

    rule = "idle"

    def evaluate(self, gpu: GpuTick) -> Iterator[Finding]:
        util = gpu.reading[UTIL_GPU_PCT]
        held = bool(gpu.processes) or gpu.reserved_for is not None
        idle = held and util is not None and util <= self._settings.max_util_pct
        held_s = self._held_for(gpu, idle)
        if self._settings.enabled and held_s >= self._settings.after_s:
            summary = (
                f"GPU {gpu.index} {self._holder(gpu)} but idle "
                f"(≤ {self._settings.max_util_pct:.0f} %) for {held_s / 60:.0f} min"
            )
            yield Finding.on_gpu(self.rule, Severity.WARNING, gpu.index, util, "%", summary)

    @staticmethod
    def _holder(gpu: GpuTick) -> str:
        if gpu.processes:
            users = sorted({p.user or "?" for p in gpu.processes})
            held = counted(len(gpu.processes), "process", "processes")
            return f"held by {held} of {', '.join(users)}"
        return f"reserved for {gpu.reserved_for}"


TREND_UNIT = "°C/min"  # temp_trend's value: how fast the temperature rises


class TrendDetector:
    """Prediction: where the temperature is heading crosses the critical line soon.

    Heat flows like a first-order system: temperature approaches an equilibrium
    with a time constant, so its rise slows down. Comparing the slope in the two
    halves of the window estimates that equilibrium; a GPU that is warming up
    towards a safe temperature is not flagged, one heading past the line is,
    with the time left. A rise that does not slow down is extrapolated linearly.
    Only a rise sustained over the whole window counts, so the first seconds of
    a load step (fast, but heading for a safe equilibrium) do not.
    """

    rule = "temp_trend"

    def __init__(self, settings: TrendSettings, temp: ThresholdSettings) -> None:
        self._settings, self._temp = settings, temp
        self._history: dict[int, deque[tuple[float, float]]] = defaultdict(deque)

    def evaluate(self, gpu: GpuTick) -> Iterator[Finding]:
        critical = self._temp.for_model(gpu.model).critical
        value = gpu.reading[TEMP_GPU_C]
        window = self._window(gpu)
        if not self._settings.enabled or critical is None or value is None or window is None:
            return
        found = _eta_to_line(window, value, critical, self._settings.min_slope_c_per_min / 60)
        if found is not None and found[0] <= self._settings.horizon_s:
            eta_s, slope = found[0], found[1] * 60
            summary = (
                f"GPU {gpu.index} heading for {critical:.0f} °C: {value:.0f} °C, rising "
                f"{slope:.1f} °C/min, crosses in about {max(1, round(eta_s / 60))} min"
            )
            # The value is the rule's own measure, the rate of rise (its peak the fastest
            # rise); the time left is in the summary.
            yield Finding.on_gpu(
                self.rule, Severity.WARNING, gpu.index, round(slope, 1), TREND_UNIT, summary
            )

    def _window(self, gpu: GpuTick) -> list[tuple[float, float]] | None:
        history = self._history[gpu.index]
        value = gpu.reading[TEMP_GPU_C]
        if value is None:
            history.clear()
            return None
        history.append((gpu.now_s, value))
        while history[0][0] < gpu.now_s - self._settings.window_s:
            history.popleft()
        if len(history) < 6 or history[-1][0] - history[0][0] < self._settings.window_s / 2:
            return None
        return list(history)


# A rise whose rate grows faster than this per °C is the onset of a load change.
ACCELERATING_PER_S = 1 / 600
# Slower than this is no first-order settling we can see: treat the rise as steady.
MAX_TAU_S = 3600.0
# The rise must have settled this long after its fastest moment to be judged...
MIN_RISE_S = 15.0
# ...or have gone on this long without a clear peak (a steady climb).
STEADY_RISE_S = 45.0


def _eta_to_line(
    window: list[tuple[float, float]], value: float, line: float, min_slope: float
) -> tuple[float, float] | None:
    """(seconds to cross `line`, rate in °C/s), or None if the GPU is not heading there.

    First order: dT/dt = (T_eq - T) / tau, so the rate of rise regressed on the
    temperature gives tau and the equilibrium T_eq. Only the current rise is
    used, from its fastest moment on (before it, power was still ramping up).
    """
    if value >= line:
        return None  # already across: the threshold rule speaks now
    rise = _current_rise(_rates(window), min_slope)
    if rise is None:
        return None
    slope_of_rate = _least_squares_slope([(temp, rate) for _, temp, rate in rise])
    rate = sum(r for _, _, r in rise[-3:]) / len(rise[-3:])
    if slope_of_rate > ACCELERATING_PER_S:
        return None  # still speeding up: the onset of a load change; wait and see
    if slope_of_rate > -1 / MAX_TAU_S:
        return (line - value) / rate, rate  # a steady rise: straight on
    tau_s = -1.0 / slope_of_rate
    equilibrium = value + rate * tau_s
    if equilibrium <= line:
        return None  # settling below the line
    return tau_s * math.log((equilibrium - value) / (equilibrium - line)), rate


def _rates(points: list[tuple[float, float]], stride: int = 5) -> list[tuple[float, float, float]]:
    """(time, temperature, rate of rise) over `stride` samples, oldest first."""
    rates = []
    for (t0, v0), (t1, v1) in zip(points, points[stride:], strict=False):
        if t1 > t0:
            rates.append((t1, (v0 + v1) / 2, (v1 - v0) / (t1 - t0)))
    return rates


def _current_rise(
    rates: list[tuple[float, float, float]], min_slope: float
) -> list[tuple[float, float, float]] | None:
    """The recent stretch where the temperature kept rising, if long enough to judge."""
    start = len(rates)
    while start > 0 and rates[start - 1][2] >= min_slope:
        start -= 1
    rise = rates[start:]
    if not rise:
        return None
    peak = max(range(len(rise)), key=lambda i: rise[i][2])
    settling = rise[peak:]
    if len(settling) >= 5 and settling[-1][0] - settling[0][0] >= MIN_RISE_S:
        return settling
    if rise[-1][0] - rise[0][0] >= STEADY_RISE_S:
        return rise  # a long rise with no clear peak: a steady climb
    return None


def _least_squares_slope(points: Sequence[tuple[float, float]]) -> float:
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    spread = sum((t - mean_t) ** 2 for t, _ in points)
    return sum((t - mean_t) * (v - mean_v) for t, v in points) / spread if spread else 0.0
