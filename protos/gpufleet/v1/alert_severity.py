"""An alert's severity: one enum for the daemon's alert rules and the console's alert rows.

The values are gpufleet.v1.Severity's numbers, so a severity goes on the wire
as `int(severity)` and comes off it as `Severity(number)`; ordered, so the worse
of two is the larger. No protobuf here: the console's fleet model imports it
without the generated code.
"""

from __future__ import annotations

import enum


class Severity(enum.IntEnum):
    INFO = 1
    WARNING = 2
    CRITICAL = 3

    @property
    def label(self) -> str:
        """As the `severity` label (Alertmanager, /metrics, silences) writes it: "warning"."""
        return self.name.lower()
