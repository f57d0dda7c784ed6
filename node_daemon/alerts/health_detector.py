"""Alerts from GPU health: one per reason the health assessor gives a GPU.

The rule is the reason's code ("row_remap_pending", "ecc_storm", ...); a reason
that needs a reset, a reboot or an inspection pages (critical), a suspect or
degraded one warns. The summary says what is wrong and what to do.

No double paging: the reasons that another rule already alerts on are left to
it. A lost GPU is the `gpu_lost` rule's, an Xid the `xid` rule's (its summary
names the Xid's meaning, and hardware Xids page), uncorrectable ECC errors the
`ecc_uncorrectable` rule's, an ECC storm the `ecc_correctable` rule's (it warns
at a lower rate, so earlier), a hardware slowdown the `throttle` rule's. So one
fault raises one alert per thing that is wrong, and the health state still shows
every reason.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpufleet.v1.alert_severity import Severity
from node_daemon.alerts.findings import Finding, GpuTick
from node_daemon.alerts.rules import GpuHealthAlertSettings
from node_daemon.health.model import HealthReason, HealthState

# Reason codes another detector already alerts on (see the module's docstring).
COVERED_ELSEWHERE = frozenset({"gpu_lost", "ecc_uncorrectable", "ecc_storm", "hw_slowdown"})


def covered_elsewhere(code: str) -> bool:
    return code in COVERED_ELSEWHERE or code.startswith("xid_")


def severity_of(state: HealthState) -> Severity:
    return Severity.WARNING if state.takes_new_work else Severity.CRITICAL


class HealthDetector:
    """Turns each GPU's health reasons (GpuTick.condition) into findings."""

    def __init__(self, settings: GpuHealthAlertSettings) -> None:
        self._settings = settings

    def evaluate(self, gpu: GpuTick) -> Iterator[Finding]:
        condition = gpu.condition
        if not self._settings.enabled or condition is None:
            return
        for reason in condition.reasons:
            if reason.state is not HealthState.HEALTHY and not covered_elsewhere(reason.code):
                yield _finding(gpu.index, reason)


def _finding(index: int, reason: HealthReason) -> Finding:
    summary = f"GPU {index}: {reason.summary} — {reason.action}"
    return Finding.on_gpu(reason.code, severity_of(reason.state), index, None, "", summary)
