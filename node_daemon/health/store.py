"""What of a GPU's health outlives the daemon, and the protocol of the store that keeps it.

Most reasons are read again each tick (a pending remap, a link down) and need no
keeping. What cannot be read again is kept: the reasons that last until someone
acts (an Xid that asked for a reset or a reboot, a failed remap), the drain, the
power cap, and the repeat-offender history. The store is written only when one of
those changes, never per tick; node_daemon.journal.health_store keeps it in the
journal's database (the health layer sits below the journal and cannot import it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from node_daemon.health.model import Drain, HealthReason


@dataclass(frozen=True)
class StoredHealth:
    """One GPU's lasting health, as the store keeps it."""

    gpu_index: int
    uuid: str | None = None  # whose it is: a GPU swapped in its place starts afresh
    boot_id: str | None = None  # the boot it was written in: a reboot clears what it cures
    sticky: tuple[HealthReason, ...] = ()
    drain: Drain | None = None
    power_capped_w: float | None = None
    last_fault_ms: int | None = None  # the latest fault that needed a reset or more
    repaired_ms: int | None = None  # the latest repair seen: a clear, a reset, a reboot

    @property
    def empty(self) -> bool:
        return (
            not self.sticky
            and self.drain is None
            and self.power_capped_w is None
            and self.last_fault_ms is None
            and self.repaired_ms is None
        )


class HealthStore(Protocol):
    """Durable storage of StoredHealth by GPU index."""

    def load(self) -> Mapping[int, StoredHealth]:
        """Everything stored, by GPU index (empty on a first start)."""
        ...

    def save(self, record: StoredHealth) -> None:
        """Keep `record` for its GPU, replacing what was kept. May raise on a full disk:
        the assessor keeps the state in memory and tries again at the next change."""
        ...
