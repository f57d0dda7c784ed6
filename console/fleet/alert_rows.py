"""An alert as the console holds it: plain data, no Qt (its Severity is gpufleet.v1's).

Beneath alerts.py (which keeps the events and the book) and silences.py (which
matches alerts), so that neither needs the other's module for the record.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpufleet.v1.alert_severity import Severity


@dataclass(frozen=True)
class AlertRow:
    target: str  # the node's HOST:PORT
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
    cleared_unix_ms: int | None
    occurrences: int
    acknowledged_by: str
    acknowledged_unix_ms: int | None
    silenced_until_unix_ms: int | None
    silenced_by: str
    silence_reason: str
    # The highest value since raised (the daemon's `value` is the newest).
    peak_value: float | None = None
    # The matcher silence keeping it quiet, if any.
    silence_id: str = ""

    @property
    def acknowledged(self) -> bool:
        return self.acknowledged_unix_ms is not None

    def silenced(self, now_unix_ms: int) -> bool:
        until = self.silenced_until_unix_ms
        return until is not None and until > now_unix_ms

    @property
    def uid(self) -> tuple[str, str]:
        """Unique across the fleet: alert ids are unique per node."""
        return self.target, self.id
