"""What a grouped, flapping or summary notification says. Plain text, no Qt.

One alert's own words are console/notify/text.py's; these are for notifications
that stand for several alerts, so they name the node (or how many nodes), how
many GPUs and what is wrong, and list the GPUs in the body.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence

from console.fleet.alert_rows import AlertRow
from console.fleet.notify_settings import throttle_reasons
from gpufleet.v1.alert_severity import Severity

# Rule names as the daemon's detectors (and the console) spell them, in words for a person.
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
    "unkillable": "unkillable process",
    "node_not_responding": "node not responding",
}
# "6 GPUs <phrase>": what several GPUs with one rule firing are.
_GROUP_PHRASES = {
    "gpu_temp": "hot",
    "memory_temp": "with hot memory",
    "power": "at or above their power limit",
    "ecc_uncorrectable": "with uncorrectable ECC errors",
    "ecc_correctable": "with correctable ECC errors",
    "xid": "with Xid errors",
    "gpu_lost": "lost",
    "memory_leak": "with a memory leak",
    "idle": "held but idle",
    "temp_trend": "heading for critical temperature",
    "unkillable": "with an unkillable process",
}
# "<name> flapping": a rule as the subject of a sentence.
_FLAP_NAMES = {"throttle": "throttle", "temp_trend": "temperature trend"}
_SHORT = (("software", "SW"), ("hardware", "HW"))
MAX_BODY_NODES = 8
Names = Callable[[str], str]


def label(rule: str) -> str:
    return RULE_LABELS.get(rule, rule.replace("_", " "))


def group_headline(severity: Severity, alerts: Sequence[AlertRow], name_of: Names) -> str:
    """'WARNING · gpu-node-03: 6 GPUs throttled (SW power cap)'; '3 nodes: ...' across nodes."""
    targets = _targets(alerts)
    where = name_of(targets[0]) if len(targets) == 1 else f"{len(targets)} nodes"
    return f"{severity.name} · {where}: {_what(alerts)}"


def group_body(alerts: Sequence[AlertRow], name_of: Names) -> str:
    """The GPUs of each node, one node a line, and since when."""
    lines = [_node_line(target, alerts, name_of) for target in _targets(alerts)]
    if len(lines) > MAX_BODY_NODES:
        lines = [*lines[:MAX_BODY_NODES], f"and {len(lines) - MAX_BODY_NODES} more nodes"]
    return "\n".join([*lines, _since(min(a.started_unix_ms for a in alerts))])


def flap_headline(
    severity: Severity, flaps: Sequence[tuple[AlertRow, int]], window_s: float, name_of: Names
) -> str:
    """'WARNING · gpu-node-03 GPU 2: throttle flapping, 4 times in 10 min' (or many GPUs)."""
    minutes = f"{window_s / 60:.0f} min"
    alerts = [alert for alert, _ in flaps]
    name = _FLAP_NAMES.get(alerts[0].rule, label(alerts[0].rule))
    counts = sorted({count for _, count in flaps})
    times = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    if len(flaps) == 1:
        return f"{severity.name} · {_where(alerts[0], name_of)}: {name} flapping, " \
               f"{times} times in {minutes}"  # fmt: skip
    targets = _targets(alerts)
    where = name_of(targets[0]) if len(targets) == 1 else f"{len(targets)} nodes"
    return f"{severity.name} · {where}: {name} flapping on {_count_gpus(alerts)}, " \
           f"{times} times each in {minutes}"  # fmt: skip


def flap_body(flaps: Sequence[tuple[AlertRow, int]], window_s: float, name_of: Names) -> str:
    alerts = [alert for alert, _ in flaps]
    lines = [_node_line(target, alerts, name_of) for target in _targets(alerts)][:MAX_BODY_NODES]
    quiet = (f"Raised and cleared again and again: no more popups for it until it has been "
             f"stable for {window_s / 60:.0f} min. The alert table shows every one.")  # fmt: skip
    return "\n".join([*lines, quiet])


def summary_headline(held_back: int) -> str:
    """'12 more warnings in the last hour, see the alert table'."""
    noun = "warning" if held_back == 1 else "warnings"
    return f"{held_back} more {noun} in the last hour, see the alert table"


def summary_body(by_rule: Counter[str], budget: int) -> str:
    rules = ", ".join(f"{label(rule)} {count}" for rule, count in by_rule.most_common())
    return f"Popups are limited to {budget} an hour (notify budget_per_hour).\nHeld back: {rules}"


def _what(alerts: Sequence[AlertRow]) -> str:
    rule = alerts[0].rule
    if any(a.gpu_index is None for a in alerts):
        return label(rule)
    if rule == "throttle":
        reasons = dict.fromkeys(r for a in alerts for r in throttle_reasons(a.summary))
        return f"{_count_gpus(alerts)} throttled ({', '.join(map(_short, reasons))})"
    return f"{_count_gpus(alerts)} {_GROUP_PHRASES.get(rule, f'with {label(rule)}')}"


def _count_gpus(alerts: Sequence[AlertRow]) -> str:
    count = len({(a.target, a.gpu_index) for a in alerts})
    return "1 GPU" if count == 1 else f"{count} GPUs"


def _node_line(target: str, alerts: Sequence[AlertRow], name_of: Names) -> str:
    gpus = sorted({a.gpu_index for a in alerts if a.target == target and a.gpu_index is not None})
    if not gpus:
        return name_of(target)
    return f"{name_of(target)}: GPU{'s' if len(gpus) > 1 else ''} {', '.join(map(str, gpus))}"


def _where(alert: AlertRow, name_of: Names) -> str:
    node = name_of(alert.target)
    return node if alert.gpu_index is None else f"{node} GPU {alert.gpu_index}"


def _targets(alerts: Sequence[AlertRow]) -> list[str]:
    return list(dict.fromkeys(a.target for a in alerts))


def _short(reason: str) -> str:
    for word, short in _SHORT:
        reason = reason.replace(word, short)
    return reason


def _since(started_unix_ms: int) -> str:
    return "since " + time.strftime("%H:%M", time.localtime(started_unix_ms / 1000))


def count_rules(alerts: Sequence[AlertRow]) -> Counter[str]:
    return Counter(a.rule for a in alerts)
