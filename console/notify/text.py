"""What a notification about one alert says: one headline, one body. Plain text, no Qt.

Notifications that stand for several alerts say what console/fleet/notice_words.py says.
"""

from __future__ import annotations

import time

from console.fleet.alert_rows import AlertRow
from console.fleet.notice_words import RULE_LABELS

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
