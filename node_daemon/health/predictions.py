"""Predictions: rates and trends that foretell a failure, each with its usual lead time.

Each is a SUSPECT reason: the GPU still takes work, and someone should look. The
lead times are what these signs usually give ahead of the failure they foretell
(field reports on A100/H100 fleets; bench/ measures ours on the simulator): an ECC
storm hours before the uncorrectable error, a failing cooler minutes before the
slowdown temperature.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from gpufleet.v1.gpu_metrics import (
    ECC_CORRECTED_TOTAL,
    ECC_UNCORRECTED_TOTAL,
    FAN_PCT,
    MEM_USED_BYTES,
    NVLINK_CRC_DATA_ERRORS_TOTAL,
    NVLINK_CRC_FLIT_ERRORS_TOTAL,
    NVLINK_REPLAY_ERRORS_TOTAL,
    PCIE_REPLAY_TOTAL,
    POWER_W,
    REMAPPED_ROWS_CORRECTABLE,
    REMAPPED_ROWS_UNCORRECTABLE,
    TEMP_GPU_C,
    UTIL_GPU_PCT,
    GpuMetric,
)
from node_daemon.backends.readings import AnyMetric, GpuHealth, GpuReading
from node_daemon.health.model import HealthState
from node_daemon.health.settings import HealthSettings
from node_daemon.health.windows import CounterWindow, RiseWindow, TickCounter

LEAD_TIME_S: dict[str, int] = {
    "ecc_storm": 3600,
    "pcie_replay_storm": 3600,
    "nvlink_storm": 1800,
    "remap_growth": 86_400,
    "telemetry_gap": 300,
    "cooling_failing": 300,
}
# A fan this close to 100 % is at its maximum.
FAN_MAX_PCT = 99.5
# Volatile counters: they start again from 0 when the GPU is reset.
_VOLATILE: tuple[GpuMetric[int], ...] = (
    ECC_CORRECTED_TOTAL,
    ECC_UNCORRECTED_TOTAL,
    PCIE_REPLAY_TOTAL,
)
_NVLINK = (NVLINK_CRC_FLIT_ERRORS_TOTAL, NVLINK_CRC_DATA_ERRORS_TOTAL, NVLINK_REPLAY_ERRORS_TOTAL)
_REMAPS = (REMAPPED_ROWS_CORRECTABLE, REMAPPED_ROWS_UNCORRECTABLE)
# Metrics every GPU reports: one that read before and reads None now is a telemetry gap.
_CORE: tuple[AnyMetric, ...] = (TEMP_GPU_C, POWER_W, MEM_USED_BYTES, UTIL_GPU_PCT)
_COUNTERS: tuple[GpuMetric[int], ...] = (*_VOLATILE, *_NVLINK, *_REMAPS)


@dataclass(frozen=True)
class _Storm:
    """A counter that rises too fast: `at_least` of `metrics`' growth within `window_s`
    (both names of HealthSettings' fields)."""

    code: str
    metrics: tuple[GpuMetric[int], ...]
    at_least: str
    window_s: str
    summary: str  # with {count} and {span}
    action: str


_STORMS = (
    _Storm(
        "ecc_storm", (ECC_CORRECTED_TOTAL,), "ecc_storm_errors", "ecc_storm_window_s",
        "ECC storm: {count} correctable errors in {span}",
        "drain the GPU and reset it when idle; inspect it if the storm comes back",
    ),
    _Storm(
        "pcie_replay_storm", (PCIE_REPLAY_TOTAL,), "pcie_replay_storm", "pcie_replay_window_s",
        "PCIe replay storm: {count} replays in {span}",
        "reseat the GPU or its riser; check the PCIe link width and speed",
    ),
    _Storm(
        "nvlink_storm", _NVLINK, "nvlink_storm_errors", "nvlink_storm_window_s",
        "NVLink error storm: {count} CRC and replay errors in {span}",
        "check the NVLink bridge or baseboard; reset the GPU",
    ),
    _Storm(
        "remap_growth", _REMAPS, "remap_growth_rows", "remap_growth_window_s",
        "{count} memory rows remapped in {span}",
        "plan an inspection: the spare rows are running out",
    ),
)  # fmt: skip


@dataclass(frozen=True)
class Prediction:
    code: str
    summary: str
    action: str

    state = HealthState.SUSPECT

    @property
    def lead_time_s(self) -> int:
        return LEAD_TIME_S[self.code]


class Predictor:
    """One GPU's windows, fed once per tick."""

    def __init__(self) -> None:
        self._counters = {metric.field: CounterWindow() for metric in _COUNTERS}
        self._gaps = TickCounter()
        self._warming = RiseWindow()
        self._core_seen: set[str] = set()
        self._temp: float | None = None
        self._fan: float | None = None
        self.reset_seen = False  # set by observe() when a volatile counter went down

    def observe(self, reading: GpuReading, now_ms: int, settings: HealthSettings) -> None:
        """Take one tick's reading (health OK, ERROR or LOST)."""
        self.reset_seen = False
        self._temp = self._fan = None
        if reading.health is GpuHealth.ERROR:
            self._gaps.mark(now_ms)
            return
        if reading.health is GpuHealth.LOST:
            return  # lost is a reason of its own, not a gap
        self._note_core(reading, now_ms)
        for metric in _COUNTERS:
            value = reading[metric]
            if value is not None and self._counters[metric.field].add(now_ms, value):
                self.reset_seen = self.reset_seen or metric in _VOLATILE
        temp, fan = reading[TEMP_GPU_C], reading[FAN_PCT]
        if temp is not None and fan is not None:
            # The rise counts only while the fan stays at or above the line.
            self._warming.add(now_ms, temp, holding=fan >= settings.cooling_fan_pct)
        self._temp, self._fan = temp, fan

    def missed(self, now_ms: int) -> None:
        """A sweep came without this GPU."""
        self._gaps.mark(now_ms)
        self._temp = self._fan = None  # no cooling verdict on an old reading

    def _note_core(self, reading: GpuReading, now_ms: int) -> None:
        present = {m.field for m in _CORE if reading[m] is not None}
        if self._core_seen - present:
            self._gaps.mark(now_ms)
        self._core_seen |= present

    def predictions(self, now_ms: int, settings: HealthSettings) -> Iterator[Prediction]:
        yield from self._storms(now_ms, settings)
        gaps = self._gaps.count(now_ms, _ms(settings.telemetry_window_s))
        if gaps >= settings.telemetry_gap_ticks:
            yield Prediction(
                "telemetry_gap",
                f"telemetry stutters: {gaps} missed or failed readings in "
                f"{_span(settings.telemetry_window_s)}",
                "check the GPU's PCIe link and the driver log (dmesg) for a bus "
                "drop; drain it if the gaps go on",
            )
        cooling = self._cooling(now_ms, settings)
        if cooling is not None:
            yield Prediction(
                "cooling_failing", cooling, "check the fans, the air flow and the room's cooling"
            )

    def _growth(self, metrics: tuple[GpuMetric[int], ...], now_ms: int, window_s: float) -> int:
        window = _ms(window_s)
        return sum(self._counters[m.field].growth(now_ms, window) for m in metrics)

    def _storms(self, now_ms: int, s: HealthSettings) -> Iterator[Prediction]:
        for storm in _STORMS:
            window_s = getattr(s, storm.window_s)
            count = self._growth(storm.metrics, now_ms, window_s)
            if count >= getattr(s, storm.at_least):
                summary = storm.summary.format(count=count, span=_span(window_s))
                yield Prediction(storm.code, summary, storm.action)

    def _cooling(self, now_ms: int, s: HealthSettings) -> str | None:
        temp, fan = self._temp, self._fan
        if temp is None or fan is None:
            return None  # no fan (passively cooled) or no reading: nothing to judge
        if fan >= FAN_MAX_PCT and temp >= s.cooling_temp_c:
            return f"cooling failing: fan at {fan:.0f} % and the GPU at {temp:.0f} °C"
        rise = self._warming.rise(now_ms, _ms(s.cooling_window_s))
        if rise is not None and rise >= s.cooling_rise_c:
            return (
                f"cooling failing: fan at {fan:.0f} % and the GPU still warming, "
                f"+{rise:.0f} °C in {_span(s.cooling_window_s)}"
            )
        return None


def _ms(seconds: float) -> int:
    return int(seconds * 1000)


def _span(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:.0f} h"
    if seconds >= 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"
