"""AlertRecord: one alert's life on the node, from raised to cleared."""

from __future__ import annotations

from dataclasses import dataclass

from gpufleet.v1.alert_severity import Severity


@dataclass
class AlertRecord:
    """Mutable by the AlertEngine only (under its lock); others get copies."""

    id: str
    key: str
    rule: str
    severity: Severity
    firing: bool
    gpu_index: int | None
    gpu_uuid: str
    pid: int | None
    value: float | None
    unit: str
    summary: str
    started_unix_ms: int
    updated_unix_ms: int
    cleared_unix_ms: int | None = None
    occurrences: int = 1
    acknowledged_by: str = ""
    acknowledged_unix_ms: int | None = None
    acknowledge_comment: str = ""
    silenced_until_unix_ms: int | None = None
    silenced_by: str = ""
    silence_reason: str = ""
    peak_value: float | None = None
    silence_id: str = ""

    def silenced(self, now_unix_ms: int) -> bool:
        until = self.silenced_until_unix_ms
        return until is not None and until > now_unix_ms

    @property
    def acknowledged(self) -> bool:
        return self.acknowledged_unix_ms is not None
