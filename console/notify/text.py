"""What a notification about an alert says: one headline, one body. Plain text, no Qt."""

from __future__ import annotations

import time

from console.fleet.alerts import AlertRow

# Rule names as the daemon's detectors spell them, in words for a person.
RULE_LABELS = {
    "gpu_temp": "GPU temperature",
    "memory_temp": "memory temperature",
    "power": "power draw",
    "throttle": "throttling",
    "ecc_uncorrectable": "uncorrectable ECC errors",
    "ecc_correctable": "correctable ECC errors",
    "xid": "Xid error",
    "gpu_lost": "GPU lost",
    "memory_leak": "memory leak",
    "idle": "idle GPU",
    "temp_trend": "critical temperature in",
    "backend_degraded": "GPU backend degraded",
    "state_disk": "state disk full",
}
# Units whose value means nothing to a person at a glance.
_UNSHOWN_UNITS = {"", "mask"}


def headline(alert: AlertRow, node_name: str) -> str:
    """E.g. ``CRITICAL · gpu-node-02 GPU 3: GPU temperature 86 °C``."""
    where = node_name if alert.gpu_index is None else f"{node_name} GPU {alert.gpu_index}"
    return f"{alert.severity.name} · {where}: {_what(alert)}"


def body(alert: AlertRow) -> str:
    """The daemon's summary and when the alert started (local time)."""
    since = time.strftime("%H:%M", time.localtime(alert.started_unix_ms / 1000))
    return f"{alert.summary}\nsince {since}"


def _what(alert: AlertRow) -> str:
    label = RULE_LABELS.get(alert.rule, alert.rule.replace("_", " "))
    if alert.value is None or alert.unit in _UNSHOWN_UNITS:
        return label
    return f"{label} {alert.value:.0f} {alert.unit}"
