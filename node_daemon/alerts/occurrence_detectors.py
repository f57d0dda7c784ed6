"""Detectors that follow events and processes over time: Xid errors, memory leaks.

The leak rule lives in node_daemon.alerts.leak_detector; it is imported here, where the
engine and the tests have always found it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from gpufleet.v1.alert_severity import Severity
from node_daemon.alerts.findings import Finding, GpuTick
from node_daemon.alerts.leak_detector import LeakDetector
from node_daemon.alerts.rules import XidSettings
from node_daemon.alerts.xid import Action, is_critical, xid_action, xid_summary

__all__ = ["LeakDetector", "XidDetector"]


@dataclass
class _XidState:
    last_s: float
    severity: Severity
    code: int  # the worst code of this alert's life: what its summary tells


class XidDetector:
    """Every Xid is counted; the alert clears a while after the last one.

    Its summary and value are the worst Xid since it was raised (the highest severity,
    then the strongest action, the latest of equals): the one to act on.
    """

    rule = "xid"

    def __init__(self, settings: XidSettings) -> None:
        self._settings = settings
        self._state: dict[int, _XidState] = {}

    def evaluate(self, gpu: GpuTick) -> Iterator[Finding]:
        xids = gpu.reading.xids if self._settings.enabled else ()
        state = self._state.get(gpu.index)
        if xids:
            codes = ([state.code] if state else []) + list(xids)
            worst = max(reversed(codes), key=self._rank)
            state = self._state[gpu.index] = _XidState(gpu.now_s, self._severity(worst), worst)
        if state is None:
            return
        if gpu.now_s - state.last_s > self._settings.clear_after_s:
            del self._state[gpu.index]
            return
        summary = xid_summary(gpu.index, state.code)
        yield Finding.on_gpu(
            self.rule, state.severity, gpu.index, float(state.code), "xid", summary,
            new_occurrences=len(xids),
        )  # fmt: skip

    def _rank(self, code: int) -> tuple[Severity, Action]:
        return self._severity(code), xid_action(code)

    def _severity(self, code: int) -> Severity:
        critical = is_critical(code, self._settings.critical)
        return Severity.CRITICAL if critical else Severity.WARNING
