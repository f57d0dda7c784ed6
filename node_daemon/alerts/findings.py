"""What detectors report each tick, and the small state helpers they share."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpufleet.v1.alert_severity import Severity
from node_daemon.backends.readings import GpuReading, GpuStatic, ProcessReading
from node_daemon.health.model import GpuCondition


@dataclass(frozen=True)
class GpuTick:
    """One GPU at one tick, with what the detectors need to judge it."""

    now_s: float
    reading: GpuReading
    static: GpuStatic | None
    processes: Sequence[ProcessReading]
    reserved_for: str | None = None
    condition: GpuCondition | None = None  # its health at this tick

    @property
    def index(self) -> int:
        return self.reading.index

    @property
    def model(self) -> str:
        return self.static.name if self.static else ""


@dataclass(frozen=True)
class Finding:
    """A condition that holds now. Its key names the alert it raises or keeps."""

    key: str
    rule: str
    severity: Severity
    gpu_index: int | None
    value: float | None
    unit: str
    summary: str
    pid: int | None = None
    new_occurrences: int = 0

    @classmethod
    def on_gpu(
        cls,
        rule: str,
        severity: Severity,
        gpu_index: int,
        value: float | None,
        unit: str,
        summary: str,
        pid: int | None = None,
        new_occurrences: int = 0,
    ) -> Finding:
        """A finding about one GPU (and one of its processes): keyed by gpu_key."""
        key = gpu_key(rule, gpu_index, pid)
        return cls(key, rule, severity, gpu_index, value, unit, summary, pid, new_occurrences)


class Gate:
    """Remembers since when a condition has held, so a rule can ask "for N seconds"."""

    def __init__(self) -> None:
        self._since: float | None = None

    def held_for(self, now_s: float, condition: bool) -> float:
        """Seconds the condition has held up to now; -1 when it does not hold."""
        if not condition:
            self._since = None
            return -1.0
        if self._since is None:
            self._since = now_s
        return now_s - self._since


def gpu_key(rule: str, index: int | None, pid: int | None = None) -> str:
    key = rule if index is None else f"{rule}/gpu{index}"
    return key if pid is None else f"{key}/pid{pid}"
