"""The ``[history]`` table of daemon.toml: whether history is kept on disk, how long, how big.

    [history]
    enabled = true
    raw_retention_s = 3600          # every sampling tick
    ten_second_retention_s = 86400    # 10 s steps (mean and max)
    minute_retention_s = 2592000   # 1 min steps (mean and max)
    max_bytes = 268435456           # the file's bound; the biggest tier gives up its oldest first
    flush_interval_s = 5            # seconds between commits (a crash loses at most this much)

Restart-only: the store is opened and sized at start (node_daemon.reload names it).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from node_daemon.errors import ConfigError, config_table

MIB = 1024 * 1024
DAY_S = 86400


@dataclass(frozen=True)
class HistorySettings:
    """Unset keys keep these defaults."""

    enabled: bool = True
    raw_retention_s: int = 3600
    ten_second_retention_s: int = DAY_S
    minute_retention_s: int = 30 * DAY_S
    max_bytes: int = 256 * MIB
    flush_interval_s: float = 5.0


# key → (smallest, largest, what it is), for the error that names the key.
_BOUNDS: dict[str, tuple[float, float, str]] = {
    "raw_retention_s": (60, 7 * DAY_S, "seconds from 60 to 604800 (a week)"),
    "ten_second_retention_s": (60, 90 * DAY_S, "seconds from 60 to 7776000 (90 days)"),
    "minute_retention_s": (60, 3 * 365 * DAY_S, "seconds from 60 to 94608000 (3 years)"),
    "max_bytes": (MIB, 1 << 40, "bytes from 1048576 (1 MiB) to 1099511627776 (1 TiB)"),
    "flush_interval_s": (0.1, 60, "seconds from 0.1 to 60"),
}


def parse_history_settings(table: Any, source: str) -> HistorySettings:
    """The [history] table over the defaults, or ConfigError naming the key at fault."""
    defaults = HistorySettings()
    config_table(table, "history", source, sorted(f.name for f in fields(defaults)))
    return replace(defaults, **{key: _value(key, value, source) for key, value in table.items()})


def _value(key: str, value: Any, source: str) -> Any:
    if key == "enabled":
        if not isinstance(value, bool):
            raise ConfigError(f"{source}: history.enabled must be true or false, got {value!r}")
        return value
    low, high, expected = _BOUNDS[key]
    whole = key != "flush_interval_s"
    number = isinstance(value, int) if whole else isinstance(value, int | float)
    if isinstance(value, bool) or not number or not low <= value <= high:
        raise ConfigError(f"{source}: history.{key} must be {expected}, got {value!r}")
    return value
