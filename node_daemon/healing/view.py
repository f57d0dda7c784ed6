"""What the healer sees each tick, and what it may ask of the rest of the daemon."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from node_daemon.alerts.model import AlertRecord
from node_daemon.backends.readings import GpuReading, GpuStatic, ProcessReading
from node_daemon.health.model import GpuCondition


@dataclass(frozen=True)
class NodeNow:
    """One sweep, as the healer judges it (on the sampler thread, after the alert rules)."""

    now_s: float
    readings: Sequence[GpuReading]
    processes: Mapping[int, Sequence[ProcessReading]]
    conditions: Mapping[int, GpuCondition]
    alerts: Sequence[AlertRecord]  # firing now
    gpus: Mapping[int, GpuStatic] = field(default_factory=dict)
    busy: Mapping[int, str] = field(default_factory=dict)  # GPU -> running workload id

    def idle(self, gpu: int) -> bool:
        """No process listed on the GPU and no workload of the daemon's running there."""
        return not self.processes.get(gpu) and gpu not in self.busy

    @property
    def now_ms(self) -> int:
        return int(self.now_s * 1000)


class HealthControl(Protocol):
    """The health assessor's side that self-healing changes (node_daemon.health.assessor)."""

    def drain(self, gpu: int, by: str, reason: str, now_ms: int) -> object: ...

    def undrain(self, gpu: int, by: str, now_ms: int) -> object: ...

    def set_power_capped(self, gpu: int, watts: float | None) -> object: ...

    def needs_inspection(self, gpu: int, summary: str, now_ms: int) -> object: ...

    def reset_done(self, gpu: int, now_ms: int) -> object: ...
