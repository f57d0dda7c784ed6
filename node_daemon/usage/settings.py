"""The ``[usage]`` table of daemon.toml: Slurm accounting's poll, and the prices of the bill.

[usage]
sacct_poll_interval_s = 300     # 0: off; restart-only
[usage.prices]                  # reloadable (SIGHUP); without it no costs are shown
currency = "EUR"
gpu_hour = { "H100" = 2.50, default = 1.20 }   # or one number for every model
kwh = 0.30
busy_weight = 1.0               # a GPU-hour in use (utilisation-weighted)
allocated_weight = 0.5          # a GPU-hour held but idle
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from node_daemon.errors import ConfigError, config_table

DEFAULT_POLL_S = 300.0
_CURRENCY = re.compile(r"[A-Z]{3}")
_PRICE_KEYS = ("currency", "gpu_hour", "kwh", "busy_weight", "allocated_weight")


@dataclass(frozen=True)
class Prices:
    """Per GPU-hour by GPU model (a key contained in the model's name, longest first), per
    kWh, and the weights of busy and merely allocated GPU time."""

    currency: str
    gpu_hour: dict[str, float] = field(default_factory=dict)  # "default" for the rest
    kwh: float = 0.0
    busy_weight: float = 1.0
    allocated_weight: float = 1.0

    def per_gpu_hour(self, model: str) -> float:
        """The price of an hour of `model` ("NVIDIA H100 80GB HBM3", or sacct's "h100")."""
        name = model.lower()
        matches = [k for k in self.gpu_hour if k != "default" and k.lower() in name]
        if matches:
            return self.gpu_hour[max(matches, key=len)]
        return self.gpu_hour.get("default", 0.0)


@dataclass(frozen=True)
class UsageSettings:
    sacct_poll_interval_s: float = DEFAULT_POLL_S
    prices: Prices | None = None


def parse_usage_settings(table: Any, source: str) -> UsageSettings:
    """The [usage] table over the defaults, or ConfigError naming the key at fault."""
    config_table(table, "usage", source, ("prices", "sacct_poll_interval_s"))
    poll = table.get("sacct_poll_interval_s", DEFAULT_POLL_S)
    if not _number(poll) or not (poll == 0 or 30 <= poll <= 86400):
        raise ConfigError(
            f"{source}: usage.sacct_poll_interval_s must be 0 (off) or seconds from 30 to "
            f"86400, got {poll!r}"
        )
    prices = table.get("prices")
    return UsageSettings(float(poll), None if prices is None else parse_prices(prices, source))


def parse_prices(table: Any, source: str) -> Prices:
    config_table(table, "usage.prices", source, _PRICE_KEYS)
    currency = table.get("currency")
    if not isinstance(currency, str) or not _CURRENCY.fullmatch(currency):
        raise ConfigError(
            f'{source}: usage.prices.currency must be an ISO 4217 code like "EUR", got {currency!r}'
        )
    return Prices(
        currency=currency,
        gpu_hour=_gpu_hour(table.get("gpu_hour", {}), source),
        kwh=_amount(table.get("kwh", 0.0), "kwh", source),
        busy_weight=_amount(table.get("busy_weight", 1.0), "busy_weight", source),
        allocated_weight=_amount(table.get("allocated_weight", 1.0), "allocated_weight", source),
    )


def _gpu_hour(value: Any, source: str) -> dict[str, float]:
    if _number(value):
        return {"default": _amount(value, "gpu_hour", source)}
    if not isinstance(value, dict):
        raise ConfigError(
            f"{source}: usage.prices.gpu_hour must be a price or a table like "
            f'{{ "H100" = 2.50, default = 1.20 }}, got {value!r}'
        )
    return {str(k): _amount(v, f'gpu_hour."{k}"', source) for k, v in value.items()}


def _amount(value: Any, key: str, source: str) -> float:
    if not _number(value) or not math.isfinite(value) or value < 0:
        raise ConfigError(f"{source}: usage.prices.{key} must be a number >= 0, got {value!r}")
    return float(value)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
