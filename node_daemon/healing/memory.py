"""What self-healing must remember across a restart, kept in the event journal.

The drains and power caps it made are kept by the health assessor (a GPU's
condition says `drained_by = "self-healing"` and `power_capped_w`), so after a
restart the return and the restore still happen. What only self-healing knows
is kept here, as one JSON record (kind "healing", id "state") written when it
changes, never per tick: the actions of the last hour (the rate limit), the
warned leakers and their deadlines, the resets and reboots taken (per GPU: for
which fault, in which boot, when, with what outcome, whether it was escalated),
and whether it drained the node in Slurm. A reset or reboot is written before
its command runs, on its own: a daemon that dies meanwhile (a reboot) has kept it.
"""

from __future__ import annotations

import json
import logging
import threading
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


@dataclass(frozen=True)
class RepairTaken:
    """A reset or reboot self-healing started for a GPU's fault: once per fault, ever.

    The fault is the GPU's spell in the state the action is for (needs reset, needs
    reboot), whatever its reasons' times: a restarted daemon dates live reasons anew,
    so a time is no identity. It lasts until the GPU has been out of that state for
    the action's cooldown_s; needed again before, the action did not cure it.
    """

    action: str  # gpu_reset, node_reboot
    gpu: int
    uuid: str | None  # whose fault it is: another GPU in that slot starts afresh
    fault: str  # the reasons, in words, for the person it escalates to
    boot_id: str  # the boot it was started in: a reboot's outcome is seen in the next
    taken_s: float
    outcome: str = ""  # "" until its command ended (it may have run: counts as taken)
    ended_s: float | None = None
    clean_since_s: float | None = None  # out of the state since, once judged
    escalated_s: float | None = None  # not cured: drained, marked for inspection


@dataclass
class Remembered:
    taken: list[tuple[str, float]] = field(default_factory=list)  # the rate limit's history
    warnings: list[LeakWarning] = field(default_factory=list)
    repairs: list[RepairTaken] = field(default_factory=list)
    slurm_drained: bool = False


class HealingMemory:
    """Read at start; `record()` is what to write with the next event (same transaction).

    The repairs are changed from the sampler thread (judging them) and the healing
    worker (starting one) and read by both: under `_lock`, as is every snapshot.
    """

    def __init__(self, journal: EventJournal) -> None:
        self._journal = journal
        self._lock = threading.RLock()
        bodies = journal.records(KIND, active_only=True)
        self.state = _parse(bodies[-1]) if bodies else Remembered()

    def record(self) -> StoredRecord:
        with self._lock:
            body = json.dumps(asdict(self.state), sort_keys=True).encode()
        return StoredRecord(KIND, RECORD_ID, True, int(time.time() * 1000), body)

    def save(self) -> None:
        """Write now, on its own; JournalError when it cannot be."""
        self._journal.record([], records=[self.record()])

    def save_or_hold(self) -> None:
        """Write now, or with the journal's next write once there is room."""
        self._journal.record_or_hold([], [], [self.record()])

    # -- the resets and reboots taken -------------------------------------------------

    def repair(self, action: str, gpu: int) -> RepairTaken | None:
        with self._lock:
            return next((r for r in self.state.repairs if (r.action, r.gpu) == (action, gpu)),
                        None)  # fmt: skip

    def keep_repair(self, repair: RepairTaken) -> None:
        """Put `repair` in place of the one for its action and GPU, if any."""
        with self._lock:
            self.forget_repair(repair.action, repair.gpu)
            self.state.repairs = [*self.state.repairs, repair]

    def forget_repair(self, action: str, gpu: int) -> None:
        with self._lock:
            self.state.repairs = [r for r in self.state.repairs
                                  if (r.action, r.gpu) != (action, gpu)]  # fmt: skip


def _parse(body: bytes) -> Remembered:
    try:
        raw: dict[str, Any] = json.loads(body)
        return Remembered(
            taken=[(str(k), float(t)) for k, t in raw.get("taken", [])],
            warnings=[LeakWarning(**w) for w in raw.get("warnings", [])],
            # An older record's "resets" and "reboot_for_ms" named faults by a time that a
            # restart changes: they cannot be matched to a fault, and are left behind.
            repairs=[RepairTaken(**r) for r in raw.get("repairs", [])],
            slurm_drained=bool(raw.get("slurm_drained", False)),
        )
    except (ValueError, TypeError, AttributeError) as exc:
        # A record this version cannot read: start afresh rather than not start.
        log.error("self-healing's stored state is unreadable, starting afresh: %s", exc)
        return Remembered()
