"""The ``[health]`` table of daemon.toml: the lines the health assessor judges by.

    [health]
    ecc_storm_errors = 100        # correctable ECC errors ...
    ecc_storm_window_s = 600      # ... within this window: an ECC storm (suspect)
    repeat_window_h = 24          # a GPU faulting again this soon after a repair: inspect it

Every key has a default that suits a datacenter GPU (docs/health.md lists them all);
unset keys keep it. Reloaded on SIGHUP: the new lines apply from the next tick, and
the windows already gathered are kept.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from node_daemon.errors import ConfigError, config_table


@dataclass(frozen=True)
class HealthSettings:
    """What makes each health reason; docs/health.md gives each one's meaning."""

    # false: no health judgement at all (every GPU healthy, drains still honoured).
    enabled: bool = True
    # Correctable ECC errors within the window: an ECC storm (suspect).
    ecc_storm_errors: int = 100
    ecc_storm_window_s: float = 600.0
    # PCIe replays within the window: a failing link or riser (suspect).
    pcie_replay_storm: int = 100
    pcie_replay_window_s: float = 600.0
    # NVLink CRC (flit and data) and replay errors within the window (suspect).
    nvlink_storm_errors: int = 100
    nvlink_storm_window_s: float = 600.0
    # Rows newly remapped within the window: the spare rows are running out (suspect).
    remap_growth_rows: int = 2
    remap_growth_window_s: float = 86_400.0
    # Ticks a GPU failed to report (an error reading, metrics that went unreadable,
    # a sweep without it) within the window: telemetry gaps (suspect).
    telemetry_gap_ticks: int = 3
    telemetry_window_s: float = 300.0
    # Cooling failing (suspect): the fan at or above cooling_fan_pct while the GPU
    # warms by cooling_rise_c within cooling_window_s, or the fan at 100 % with the GPU
    # at or above cooling_temp_c.
    cooling_fan_pct: float = 95.0
    cooling_rise_c: float = 3.0
    cooling_window_s: float = 120.0
    cooling_temp_c: float = 75.0
    # Hardware slowdown (thermal, power brake) for this long: degraded.
    hw_slowdown_for_s: float = 30.0
    # A GPU that faults again (a reason that needs a reset or more) this many hours
    # after a repair (a clear, a reset or a reboot seen) needs inspection.
    repeat_window_h: float = 24.0
    # A prediction's reason stays this long after its signal has gone, so a storm
    # that pauses for a tick does not flap the state.
    hold_s: float = 300.0


_LIMITS: dict[str, tuple[float, float]] = {
    "ecc_storm_errors": (1, 1e9), "ecc_storm_window_s": (1, 604_800),
    "pcie_replay_storm": (1, 1e9), "pcie_replay_window_s": (1, 604_800),
    "nvlink_storm_errors": (1, 1e9), "nvlink_storm_window_s": (1, 604_800),
    "remap_growth_rows": (1, 1e6), "remap_growth_window_s": (60, 2_592_000),
    "telemetry_gap_ticks": (1, 1e6), "telemetry_window_s": (1, 86_400),
    "cooling_fan_pct": (1, 100), "cooling_rise_c": (0.1, 100),
    "cooling_window_s": (1, 3600), "cooling_temp_c": (1, 150),
    "hw_slowdown_for_s": (0, 86_400), "repeat_window_h": (0, 8760), "hold_s": (0, 86_400),
}  # fmt: skip


def parse_health_settings(table: Any, source: str) -> HealthSettings:
    """The [health] table over the defaults, or ConfigError naming the key at fault."""
    defaults = HealthSettings()
    config_table(table, "health", source, sorted(f.name for f in fields(defaults)))
    values = {key: _checked(defaults, key, value, source) for key, value in table.items()}
    return replace(defaults, **values)


def _checked(defaults: HealthSettings, key: str, value: Any, source: str) -> Any:
    current = getattr(defaults, key)
    if isinstance(current, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{source}: [health] {key} must be true or false, got {value!r}")
        return value
    wanted = "a whole number" if isinstance(current, int) else "a number"
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if isinstance(current, int) and not isinstance(value, int):
        number = False
    low, high = _LIMITS[key]
    if not number or not low <= value <= high:
        raise ConfigError(
            f"{source}: [health] {key} must be {wanted} from {low:g} to {high:g}, got {value!r}"
        )
    return float(value) if isinstance(current, float) else value
