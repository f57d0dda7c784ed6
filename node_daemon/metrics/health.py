"""GPU health on /metrics: the state as a state set, drains, reasons, Xid counts.

The state follows Prometheus' state-set convention (as kube-state-metrics'
kube_pod_status_phase does): one series per state, 1 for the GPU's current state
and 0 for the others, so `gpufleet_gpu_health_state{state="needs_reset"} == 1`
selects the GPUs that need a reset and a dashboard can stack them by state.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from node_daemon.backends.readings import GpuStatic
from node_daemon.health.model import GpuCondition, HealthState

STATES = tuple(state.name.lower() for state in HealthState)


def health_families(
    conditions: Mapping[int, GpuCondition], gpus: Mapping[int, GpuStatic]
) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
    labels = ["gpu", "UUID"]
    state = GaugeMetricFamily(
        "gpufleet_gpu_health_state",
        "1 for the GPU's health state (healthy, degraded, suspect, needs_reset, "
        "needs_reboot, needs_inspection), 0 for the others.",
        labels=[*labels, "state"],
    )
    drained = GaugeMetricFamily(
        "gpufleet_gpu_drained", "1 while the GPU is drained from placement.", labels=labels
    )
    reasons = GaugeMetricFamily(
        "gpufleet_gpu_health_reasons",
        "1 for each reason the GPU is in its health state, by reason code.",
        labels=[*labels, "code"],
    )
    xids = CounterMetricFamily(
        "gpufleet_gpu_xid_errors", "Xid errors since the daemon started, by code.",
        labels=[*labels, "xid"],
    )  # fmt: skip
    for index in sorted(conditions):
        condition = conditions[index]
        gpu = [str(index), gpus[index].uuid if index in gpus else ""]
        for name in STATES:
            state.add_metric([*gpu, name], float(condition.state.name.lower() == name))
        drained.add_metric(gpu, float(condition.drain is not None))
        for reason in condition.reasons:
            reasons.add_metric([*gpu, reason.code], 1.0)
        for code, count in sorted(condition.xid_counts.items()):
            xids.add_metric([*gpu, str(code)], count)
    yield from (state, drained, reasons, xids)
