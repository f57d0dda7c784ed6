"""Detectors that follow events and processes over time: Xid errors, memory leaks."""

from __future__ import annotations

import itertools
from collections import defaultdict, deque
from collections.abc import Iterator
from dataclasses import dataclass

from gpufleet.v1.gpu_metrics import UTIL_GPU_PCT
from node_daemon.alerts.findings import Finding, GpuTick, gpu_key
from node_daemon.alerts.model import Severity
from node_daemon.alerts.rules import LeakSettings, XidSettings
from node_daemon.alerts.xid import Action, is_critical, xid_action, xid_summary

MIB = 1024**2


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
        yield Finding(
            gpu_key(self.rule, gpu.index), self.rule, state.severity, gpu.index,
            float(state.code), "xid", summary, new_occurrences=len(xids),
        )  # fmt: skip

    def _rank(self, code: int) -> tuple[Severity, Action]:
        return self._severity(code), xid_action(code)

    def _severity(self, code: int) -> Severity:
        critical = is_critical(code, self._settings.critical)
        return Severity.CRITICAL if critical else Severity.WARNING


class LeakDetector:
    """A process whose GPU memory only grows, by a lot, while its GPU is hardly busy."""

    rule = "memory_leak"

    def __init__(self, settings: LeakSettings) -> None:
        self._settings = settings
        # (gpu, pid) -> (time, memory bytes, GPU utilisation) samples within the window
        self._series: dict[tuple[int, int], deque[tuple[float, int, float]]] = defaultdict(deque)

    def evaluate(self, gpu: GpuTick) -> Iterator[Finding]:
        if not self._settings.enabled:
            return
        present = set()
        for process in gpu.processes:
            if process.gpu_memory_bytes is None:
                continue
            present.add(process.pid)
            series = self._track(gpu, process.pid, process.gpu_memory_bytes)
            growth = self._leak_growth(series)
            if growth is not None:
                yield self._finding(gpu, process.pid, process.user, process.command, growth)
        for key in [k for k in self._series if k[0] == gpu.index and k[1] not in present]:
            del self._series[key]

    def _track(self, gpu: GpuTick, pid: int, memory: int) -> deque[tuple[float, int, float]]:
        series = self._series[(gpu.index, pid)]
        util = gpu.reading[UTIL_GPU_PCT]
        series.append((gpu.now_s, memory, 100.0 if util is None else util))
        # Keep one sample older than the window, so the window is fully covered.
        while len(series) > 2 and series[1][0] <= gpu.now_s - self._settings.window_s:
            series.popleft()
        return series

    def _leak_growth(self, series: deque[tuple[float, int, float]]) -> int | None:
        if series[-1][0] - series[0][0] < self._settings.window_s:
            return None
        memory = [m for _, m, _ in series]
        if any(b < a for a, b in itertools.pairwise(memory)):
            return None
        growth = memory[-1] - memory[0]
        busy = sum(u for _, _, u in series) / len(series)
        if growth < self._settings.min_growth_mib * MIB or busy > self._settings.max_util_pct:
            return None
        return growth

    def _finding(
        self, gpu: GpuTick, pid: int, user: str | None, command: str | None, growth: int
    ) -> Finding:
        who = f"{user or '?'}: {(command or '?')[:60]}"
        summary = (
            f"GPU {gpu.index}: process {pid} ({who}) grew {growth / MIB:,.0f} MiB in "
            f"{self._settings.window_s:.0f} s while the GPU is idle"
        )
        return Finding(
            gpu_key(self.rule, gpu.index, pid), self.rule, Severity.WARNING, gpu.index,
            growth / MIB, "MiB", summary, pid=pid,
        )  # fmt: skip
