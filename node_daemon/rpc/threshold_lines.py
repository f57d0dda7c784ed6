"""The node's alert lines on catalogue metrics, for the inventory (threshold lines on plots).

The level rules (gpu_temp on temp_gpu_c, memory_temp on temp_mem_c) are fixed lines,
per GPU model where [alerts.RULE.models] overrides them. The power rule is not a
line on power_w (it is each GPU's own limit times a ratio) and is left out: a plot
draws the limit from the inventory's power_limit_w.
"""

from __future__ import annotations

from collections.abc import Collection

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1.gpu_metrics import TEMP_GPU_C, TEMP_MEM_C
from node_daemon.alerts.rules import AlertSettings, ThresholdSettings


def alert_thresholds(settings: AlertSettings, models: Collection[str]) -> list[pb.AlertThreshold]:
    """Each enabled level rule's warning and critical lines. One message carries no GPU:
    a node whose GPUs are all one model gets that model's lines, any other node the
    rule's own."""
    model = next(iter(models)) if len(set(models)) == 1 else None
    lines = []
    for rule, metric, levels in (
        ("gpu_temp", TEMP_GPU_C.field, settings.gpu_temp),
        ("memory_temp", TEMP_MEM_C.field, settings.memory_temp),
    ):
        lines.extend(_lines(rule, metric, levels.for_model(model) if model else levels))
    return lines


def _lines(rule: str, metric: str, levels: ThresholdSettings) -> list[pb.AlertThreshold]:
    if not levels.enabled:
        return []
    pairs = ((pb.SEVERITY_WARNING, levels.warning), (pb.SEVERITY_CRITICAL, levels.critical))
    return [pb.AlertThreshold(metric=metric, rule=rule, severity=severity, value=value)
            for severity, value in pairs if value is not None]  # fmt: skip
