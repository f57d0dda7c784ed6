"""What self-healing must remember across a restart, kept in the event journal.

The drains and power caps it made are kept by the health assessor (a GPU's
condition says `drained_by = "self-healing"` and `power_capped_w`), so after a
restart the return and the restore still happen. What only self-healing knows
is kept here, as one JSON record (kind "healing", id "state") written when it
changes, never per tick: the actions of the last hour (the rate limit), the
warned leakers and their deadlines, the faults a reset or reboot was already
run for, and whether it drained the node in Slurm.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from node_daemon.journal.event_journal import EventJournal, StoredRecord

log = logging.getLogger(__name__)

KIND, RECORD_ID = "healing", "state"


@dataclass(frozen=True)
class LeakWarning:
    """A leaker warned: acted on at `deadline_s` if its leak still holds."""

    gpu: int
    pid: int
    start_time_unix_ms: int
    deadline_s: float
    dry_run: bool = False


@dataclass
class Remembered:
    taken: list[tuple[str, float]] = field(default_factory=list)  # the rate limit's history
    warnings: list[LeakWarning] = field(default_factory=list)
    resets: dict[int, int] = field(default_factory=dict)  # GPU -> the fault (since ms) reset for
    reboot_for_ms: int | None = None  # the fault a reboot was requested for
    slurm_drained: bool = False


class HealingMemory:
    """Read at start; `record()` is what to write with the next event (same transaction)."""

    def __init__(self, journal: EventJournal) -> None:
        self._journal = journal
        bodies = journal.records(KIND, active_only=True)
        self.state = _parse(bodies[-1]) if bodies else Remembered()

    def record(self) -> StoredRecord:
        body = json.dumps(asdict(self.state), sort_keys=True).encode()
        return StoredRecord(KIND, RECORD_ID, True, int(time.time() * 1000), body)

    def save(self) -> None:
        """Write now, on its own (before a reboot, which leaves no time for an event)."""
        self._journal.record([], records=[self.record()])


def _parse(body: bytes) -> Remembered:
    try:
        raw: dict[str, Any] = json.loads(body)
        return Remembered(
            taken=[(str(k), float(t)) for k, t in raw.get("taken", [])],
            warnings=[LeakWarning(**w) for w in raw.get("warnings", [])],
            resets={int(g): int(ms) for g, ms in raw.get("resets", {}).items()},
            reboot_for_ms=raw.get("reboot_for_ms"),
            slurm_drained=bool(raw.get("slurm_drained", False)),
        )
    except (ValueError, TypeError, AttributeError) as exc:
        # A record this version cannot read: start afresh rather than not start.
        log.error("self-healing's stored state is unreadable, starting afresh: %s", exc)
        return Remembered()
