"""Each GPU's fault record: the incidents it had, kept with the GPU (by UUID) across
restarts, and a reliability score from them.

- **An Xid burst is one incident.** Xids that come within `burst_quiet_s` of the
  burst's last one belong to it: a storm of 50 Xids of 8 codes in two minutes is one
  incident with its count and its codes. After a quiet spell the next Xid starts a
  new one. The burst's state is the worst its codes call for (an Xid the application
  survives leaves it healthy: counted, weighing nothing).
- **A health reason's spell is one incident** (a pending row remap, a lost GPU, a
  prediction...): from when the reason appears to when it goes. The Xid reasons are
  the bursts', not counted twice.
- **The score** is 100 less each incident's weight by the state it called for
  (needs inspection 40, reboot 25, reset 15, suspect 5, degraded 2), halved every
  `half_life_days` since the incident's last sign; never below 0.

A clock stepped back never splits a burst nor moves an incident's times backwards:
what was recorded stays. The record keeps the newest MAX_INCIDENTS incidents.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from node_daemon.backends.readings import GpuReading
from node_daemon.health.model import GpuCondition, HealthState
from node_daemon.health.xids import xid_verdict

XID = "xid"
MAX_INCIDENTS = 500
BURST_QUIET_S = 300.0
HALF_LIFE_DAYS = 30.0
DAY_MS = 86_400_000
WEIGHT = {
    HealthState.NEEDS_INSPECTION: 40.0,
    HealthState.NEEDS_REBOOT: 25.0,
    HealthState.NEEDS_RESET: 15.0,
    HealthState.SUSPECT: 5.0,
    HealthState.DEGRADED: 2.0,
    HealthState.HEALTHY: 0.0,
}


@dataclass(frozen=True)
class Incident:
    """One fault: an Xid burst, or a health reason's spell."""

    kind: str  # XID, or the reason's code ("row_remap_pending", "gpu_lost", ...)
    state: HealthState  # the worst it called for
    started_ms: int
    last_ms: int  # the last Xid of the burst; the last sweep the reason was seen
    count: int = 1  # Xids in the burst
    codes: tuple[int, ...] = ()  # the burst's Xid codes, sorted
    ended: bool = False  # a reason gone, or a burst followed by a quiet spell

    def weight(self, now_ms: int, half_life_days: float = HALF_LIFE_DAYS) -> float:
        """Its weight now: the state's, halved every half life since it ended (in full
        while it lasts)."""
        age_days = max(0, now_ms - self.last_ms) / DAY_MS if self.ended else 0.0
        return WEIGHT[self.state] * 0.5 ** (age_days / half_life_days)


@dataclass(frozen=True)
class GpuFaults:
    """One GPU's record."""

    uuid: str
    gpu_index: int
    incidents: tuple[Incident, ...] = ()

    def score(self, now_ms: int, half_life_days: float = HALF_LIFE_DAYS) -> float:
        """100 for a GPU with no fault on record, less each incident's decayed weight."""
        lost = sum(i.weight(now_ms, half_life_days) for i in self.incidents)
        return round(max(0.0, 100.0 - lost), 1)


def xid_state(codes: Sequence[int]) -> HealthState:
    """The worst state a burst's codes call for (HEALTHY: the application's own)."""
    states = (xid_verdict(code).state for code in codes)
    return max((s for s in states if s is not None), default=HealthState.HEALTHY)


def _open_burst(record: GpuFaults) -> int | None:
    """Where the Xid burst not ended yet stands in the record (None: there is none)."""
    incidents = record.incidents
    return next((n for n in range(len(incidents) - 1, -1, -1)
                 if incidents[n].kind == XID and not incidents[n].ended), None)  # fmt: skip


def end_quiet_burst(record: GpuFaults, now_ms: int, quiet_s: float) -> GpuFaults:
    """The open burst ended once `quiet_s` passed without an Xid."""
    at = _open_burst(record)
    if at is None or now_ms - record.incidents[at].last_ms <= quiet_s * 1000:
        return record
    incidents = list(record.incidents)
    incidents[at] = replace(incidents[at], ended=True)
    return replace(record, incidents=tuple(incidents))


def add_xids(record: GpuFaults, xids: Sequence[int], now_ms: int) -> GpuFaults:
    """The record with this sweep's Xids: the open burst grown, or a new burst (a burst
    gone quiet was ended first: end_quiet_burst)."""
    if not xids:
        return record
    incidents, at = list(record.incidents), _open_burst(record)
    if at is not None:
        burst = incidents[at]
        incidents[at] = replace(
            burst, last_ms=max(burst.last_ms, now_ms), count=burst.count + len(xids),
            codes=tuple(sorted({*burst.codes, *xids})), state=max(burst.state, xid_state(xids)),
        )  # fmt: skip
    else:
        codes = tuple(sorted(set(xids)))
        incidents.append(Incident(XID, xid_state(xids), now_ms, now_ms, len(xids), codes))
    return replace(record, incidents=tuple(incidents[-MAX_INCIDENTS:]))


def follow_reasons(record: GpuFaults, condition: GpuCondition | None, now_ms: int) -> GpuFaults:
    """The record with the condition's reasons: a new incident for each reason that
    appeared, the end of each that went. Xid reasons are the bursts'."""
    present = {r.code: r for r in (condition.reasons if condition else ())
               if not r.code.startswith("xid_")}  # fmt: skip
    incidents = list(record.incidents)
    open_kinds = {i.kind: n for n, i in enumerate(incidents) if i.kind != XID and not i.ended}
    changed = False
    for kind, at in open_kinds.items():
        if kind not in present:
            incident = incidents[at]
            incidents[at] = replace(incident, ended=True, last_ms=max(incident.last_ms, now_ms))
            changed = True
    for code, reason in present.items():
        if code not in open_kinds:
            incidents.append(Incident(code, reason.state, now_ms, now_ms))
            changed = True
    if not changed:
        return record
    return replace(record, incidents=tuple(incidents[-MAX_INCIDENTS:]))


@dataclass
class FaultRecorder:
    """Keeps every GPU's record from the sweeps, on the sampler thread; `save` is called
    with each record that changed (the journal keeps it), `load` gave the kept ones."""

    uuid_of: Callable[[int], str | None]
    save: Callable[[GpuFaults], None]
    kept: Mapping[str, GpuFaults] = field(default_factory=dict)
    quiet_s: float = BURST_QUIET_S

    def __post_init__(self) -> None:
        self.records: dict[str, GpuFaults] = dict(self.kept)

    def observe(
        self,
        now_ms: int,
        readings: Sequence[GpuReading],
        conditions: Mapping[int, GpuCondition],
    ) -> None:
        for reading in readings:
            uuid = self.uuid_of(reading.index)
            if not uuid:
                continue  # a GPU whose UUID cannot be read has no record to keep
            held = self.records.get(uuid) or GpuFaults(uuid, reading.index)
            record = replace(held, gpu_index=reading.index)
            record = end_quiet_burst(record, now_ms, self.quiet_s)
            record = add_xids(record, reading.xids, now_ms)
            record = follow_reasons(record, conditions.get(reading.index), now_ms)
            if record != held:
                self.records[uuid] = record
                self.save(record)

    def of_gpu(self, index: int) -> GpuFaults | None:
        """GPU `index`'s record: an empty one while nothing is on record; None when its
        UUID is unknown (a GPU that could not be read)."""
        uuid = self.uuid_of(index)
        if not uuid:
            return None
        return self.records.get(uuid) or GpuFaults(uuid, index)
