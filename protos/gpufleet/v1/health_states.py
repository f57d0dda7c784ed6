"""A GPU's health state, worst last: one enum for the daemon, the console and the Xid catalogue.

The values are gpufleet.v1.GpuHealthState's numbers, so a state goes on the wire
as `int(state)` and comes off it as `HealthState(number)`. No protobuf here: the
console's fleet model and the catalogue import it without the generated code.
"""

from __future__ import annotations

import enum


class HealthState(enum.IntEnum):
    """Ordered: a GPU's state is the worst (highest) of its reasons' states."""

    HEALTHY = 1
    DEGRADED = 2
    SUSPECT = 3
    NEEDS_RESET = 4
    NEEDS_REBOOT = 5
    NEEDS_INSPECTION = 6

    @property
    def words(self) -> str:
        """As people write it: "needs reset"."""
        return self.name.lower().replace("_", " ")

    @property
    def takes_new_work(self) -> bool:
        """Placement puts no new work on a GPU that needs a reset, a reboot or inspection."""
        return self < HealthState.NEEDS_RESET

    @property
    def needs_action(self) -> bool:
        """Someone (or self-healing) has to do something: reset, reboot, inspect."""
        return not self.takes_new_work
