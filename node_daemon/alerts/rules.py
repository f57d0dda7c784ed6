"""Alert rule settings: defaults that work out of the box, overridable in TOML.

    [alerts.gpu_temp]
    warning = 75          # °C
    critical = 85
    warning_for_s = 10    # the value must hold this long before the alert fires
    critical_for_s = 0    # a GPU at its critical temperature pages at once
    hysteresis = 3        # clears this many degrees below the line

    [alerts.gpu_temp.models."NVIDIA L40S"]   # per GPU model overrides
    warning = 80
    critical = 88

See docs/alerts.md for every rule and key.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, ClassVar

from node_daemon.errors import ConfigError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ThresholdSettings:
    enabled: bool = True
    warning: float | None = None
    critical: float | None = None
    warning_for_s: float = 10.0
    critical_for_s: float = 0.0
    hysteresis: float = 3.0
    models: dict[str, ThresholdSettings] = field(default_factory=dict)

    def for_model(self, model: str) -> ThresholdSettings:
        return self.models.get(model, self)

    def lines(self, model: str) -> tuple[float, ...]:
        """The warning and critical lines for a model (none while the rule is off)."""
        settings = self.for_model(model)
        if not settings.enabled:
            return ()
        return tuple(line for line in (settings.warning, settings.critical) if line is not None)


@dataclass(frozen=True)
class PowerSettings:
    enabled: bool = True
    # Warn when power draw stays at or above limit * ratio.
    ratio: float = 1.0
    for_s: float = 30.0


@dataclass(frozen=True)
class ThrottleSettings:
    enabled: bool = True
    for_s: float = 30.0


@dataclass(frozen=True)
class EccSettings:
    enabled: bool = True
    # Correctable errors within the window that make a warning.
    correctable_threshold: int = 10
    correctable_window_s: float = 600.0


@dataclass(frozen=True)
class XidSettings:
    enabled: bool = True
    # The codes that page. None: those whose catalogue action is a GPU reset or more
    # (gpufleet.v1.xid_catalogue); an application's Xid (13, 31, 43, 45...) warns.
    critical: tuple[int, ...] | None = None
    # The alert clears this long after the last occurrence.
    clear_after_s: float = 300.0


@dataclass(frozen=True)
class LeakSettings:
    """A process's GPU memory growing for long, on idle and busy GPUs (alerts/leak_detector.py)."""

    enabled: bool = True
    history_s: float = 3600.0  # how far back the trend is judged
    bucket_s: float = 30.0  # one point (the lowest memory seen) per bucket
    min_duration_s: float = 600.0  # growth must last this long to be a leak
    min_rate_mib_per_min: float = 32.0
    min_growth_mib: float = 512.0
    steady_fraction: float = 0.75  # of bucket-to-bucket steps that must not fall
    critical_within_s: float = 1800.0  # critical when the GPU is full sooner than this
    # Keys of the old fixed-window detector: accepted so old configs load, ignored.
    RETIRED: ClassVar[Mapping[str, str]] = {
        "window_s": "ignored: the trend is judged over history_s, sustained for min_duration_s",
        "max_util_pct": "ignored: a leak is a leak on a busy GPU too",
    }

    def __post_init__(self) -> None:
        if not 0 < self.steady_fraction <= 1:
            raise ConfigError("alerts.memory_leak.steady_fraction: must be above 0 and at most 1")
        if self.bucket_s <= 0 or self.min_duration_s < 6 * self.bucket_s:
            raise ConfigError(
                "alerts.memory_leak: min_duration_s must span at least 6 buckets of bucket_s "
                f"(> 0), got min_duration_s {self.min_duration_s:g}, bucket_s {self.bucket_s:g}"
            )
        if self.history_s < self.min_duration_s:
            raise ConfigError("alerts.memory_leak.history_s: must be at least min_duration_s")


@dataclass(frozen=True)
class IdleSettings:
    enabled: bool = True
    # An occupied GPU (it has processes) this idle for this long is waste.
    after_s: float = 1800.0
    max_util_pct: float = 5.0


@dataclass(frozen=True)
class TrendSettings:
    enabled: bool = True
    window_s: float = 60.0
    # Warn when the trend crosses the critical temperature within this horizon.
    horizon_s: float = 300.0
    min_slope_c_per_min: float = 1.0


@dataclass(frozen=True)
class GpuHealthAlertSettings:
    # An alert per GPU health reason (node_daemon.alerts.health_detector).
    enabled: bool = True


@dataclass(frozen=True)
class AlertSettings:
    gpu_temp: ThresholdSettings = ThresholdSettings(warning=75.0, critical=85.0)
    memory_temp: ThresholdSettings = ThresholdSettings(warning=85.0, critical=95.0)
    power: PowerSettings = PowerSettings()
    throttle: ThrottleSettings = ThrottleSettings()
    ecc: EccSettings = EccSettings()
    xid: XidSettings = XidSettings()
    memory_leak: LeakSettings = LeakSettings()
    idle: IdleSettings = IdleSettings()
    temp_trend: TrendSettings = TrendSettings()
    gpu_health: GpuHealthAlertSettings = GpuHealthAlertSettings()


def _merge(base: Any, table: dict[str, Any], where: str) -> Any:
    known = {f.name: f for f in fields(base)}
    retired: Mapping[str, str] = getattr(base, "RETIRED", {})
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key in retired:
            log.warning("%s.%s: %s", where, key, retired[key])
            continue
        if key not in known:
            raise ConfigError(f"{where}: unknown key {key!r} (known: {', '.join(sorted(known))})")
        values[key] = _coerce(base, key, value, f"{where}.{key}")
    return replace(base, **values)


def _coerce(base: Any, key: str, value: Any, where: str) -> Any:
    current = getattr(base, key)
    if key == "models":
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: must be a table of GPU model names")
        return {name: _merge(base, sub, f"{where}.{name!r}") for name, sub in value.items()}
    if isinstance(current, bool):
        ok = isinstance(value, bool)
    elif isinstance(current, tuple) or (isinstance(base, XidSettings) and key == "critical"):
        ok = isinstance(value, list) and all(isinstance(v, int) for v in value)
        value = tuple(value) if ok else value
    else:
        ok = isinstance(value, int | float) and not isinstance(value, bool) and value >= 0
    if not ok:
        raise ConfigError(f"{where}: expected {type(current).__name__} >= 0, got {value!r}")
    return value


def parse_alert_settings(table: dict[str, Any], source: str) -> AlertSettings:
    """The [alerts] table of a daemon config over the defaults."""
    settings = AlertSettings()
    for name, sub in table.items():
        if name not in {f.name for f in fields(settings)}:
            raise ConfigError(f"{source}: unknown alert rule [alerts.{name}]")
        if not isinstance(sub, dict):
            raise ConfigError(f"{source}: [alerts.{name}] must be a table")
        merged = _merge(getattr(settings, name), sub, f"{source}: alerts.{name}")
        settings = replace(settings, **{name: merged})
    return settings
