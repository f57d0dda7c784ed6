"""Each GPU's fault record (#32): an Xid burst is one incident, a second burst after a
quiet spell is a second; health reasons' spells are incidents; the score; the record
kept in the journal across a restart, a restored state directory, a corrupt record and
a clock stepped back.

The recorder without a daemon on hand-made sweeps (a manual clock in ms); the store
over a real journal (SQLite) in a temporary state directory; and the daemon itself
(in-process NodeDaemon, the simulated backend with a scenario) for /metrics.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from node_daemon.backends.readings import GpuReading
from node_daemon.health.fault_record import (
    BURST_QUIET_S,
    DAY_MS,
    XID,
    FaultRecorder,
    GpuFaults,
    Incident,
)
from node_daemon.health.model import GpuCondition, HealthReason, HealthState
from node_daemon.journal.event_journal import EventJournal
from node_daemon.journal.fault_store import KIND, JournalFaultStore, faults_body, faults_from_body

T0 = 1_800_000_000_000
UUID = "GPU-aaaa-0"
STORM = (79, 48, 63, 64, 74, 92, 94, 95)  # eight codes


def recorder(kept: dict[str, GpuFaults] | None = None) -> tuple[FaultRecorder, list[GpuFaults]]:
    saved: list[GpuFaults] = []
    uuids = {0: UUID, 1: "GPU-aaaa-1"}
    return FaultRecorder(uuids.get, saved.append, kept or {}), saved


def sweep(faults: FaultRecorder, at_ms: int, xids: tuple[int, ...] = (),
          reasons: tuple[HealthReason, ...] = ()) -> None:  # fmt: skip
    readings = [GpuReading(index=0, xids=xids), GpuReading(index=1)]
    conditions = {0: GpuCondition(0, reasons=reasons)} if reasons else {}
    faults.observe(at_ms, readings, conditions)


def storm(faults: FaultRecorder, start_ms: int, xids: int = 50, over_s: int = 120) -> None:
    """`xids` Xids of the eight codes over `over_s` seconds, one sweep a second."""
    per_sweep = [[] for _ in range(over_s)]  # type: list[list[int]]
    for n in range(xids):
        per_sweep[n * over_s // xids].append(STORM[n % len(STORM)])
    for second, codes in enumerate(per_sweep):
        sweep(faults, start_ms + second * 1000, tuple(codes))


def test_a_storm_is_one_incident_and_a_storm_after_quiet_is_a_second() -> None:
    faults, saved = recorder()
    storm(faults, T0)
    record = faults.records[UUID]
    assert len(record.incidents) == 1
    burst = record.incidents[0]
    assert (burst.kind, burst.count, burst.codes) == (XID, 50, tuple(sorted(STORM)))
    assert burst.state is HealthState.NEEDS_INSPECTION  # the worst of its codes: Xid 64
    assert burst.started_ms == T0 and not burst.ended
    assert "GPU-aaaa-1" not in faults.records  # the quiet GPU has nothing on record
    quiet_end = T0 + 120_000 + int(BURST_QUIET_S * 1000) + 1000
    sweep(faults, quiet_end)  # a quiet spell: the burst ends
    assert faults.records[UUID].incidents[0].ended
    storm(faults, quiet_end + 60_000, xids=20, over_s=30)
    incidents = faults.records[UUID].incidents
    assert [(i.kind, i.count) for i in incidents] == [(XID, 50), (XID, 20)]
    assert saved[-1] == faults.records[UUID]  # every change was handed to the store


def test_xids_closer_than_the_quiet_spell_stay_one_burst() -> None:
    faults, _ = recorder()
    sweep(faults, T0, (13,))  # an application's Xid: counted, weighing nothing
    sweep(faults, T0 + int(BURST_QUIET_S * 1000) - 1000, (13, 31))
    (burst,) = faults.records[UUID].incidents
    assert (burst.count, burst.codes, burst.state) == (3, (13, 31), HealthState.HEALTHY)
    assert faults.records[UUID].score(T0) == 100.0


def test_a_reason_spell_is_one_incident_and_xid_reasons_are_not_counted_twice() -> None:
    faults, _ = recorder()
    remap = HealthReason("row_remap_pending", HealthState.NEEDS_RESET, "a row remap is pending",
                         "reset the GPU", T0)  # fmt: skip
    xid = HealthReason("xid_79", HealthState.NEEDS_REBOOT, "Xid 79", "reboot", T0)
    for second in range(10):
        sweep(faults, T0 + second * 1000, (79,) if second == 0 else (), (remap, xid))
    sweep(faults, T0 + 10_000)  # the remap is done: the spell ends
    kinds = [(i.kind, i.ended) for i in faults.records[UUID].incidents]
    assert kinds == [(XID, False), ("row_remap_pending", True)]
    assert faults.records[UUID].incidents[1].last_ms == T0 + 10_000


def test_the_score_weighs_incidents_by_state_and_halves_them_every_thirty_days() -> None:
    ended = Incident(XID, HealthState.NEEDS_RESET, T0, T0, count=5, codes=(48,), ended=True)
    lasting = Incident("gpu_lost", HealthState.NEEDS_REBOOT, T0, T0)
    record = GpuFaults(UUID, 0, (ended, lasting))
    assert record.score(T0) == 100 - 15 - 25
    assert record.score(T0 + 30 * DAY_MS) == 100 - 7.5 - 25  # a lasting one weighs in full
    worst = GpuFaults(UUID, 0, tuple(Incident(XID, HealthState.NEEDS_INSPECTION, T0, T0)
                                     for _ in range(5)))  # fmt: skip
    assert worst.score(T0) == 0.0  # never below 0


def test_a_clock_stepped_back_neither_splits_a_burst_nor_moves_it_back() -> None:
    faults, _ = recorder()
    sweep(faults, T0, (48,))
    sweep(faults, T0 - 3_600_000, (48,))  # the clock stepped an hour back
    sweep(faults, T0 + 1000, (48,))
    (burst,) = faults.records[UUID].incidents
    assert (burst.count, burst.started_ms, burst.last_ms) == (3, T0, T0 + 1000)


# Kept in the journal -------------------------------------------------------------------


def journal(state: Path) -> EventJournal:
    state.mkdir(exist_ok=True)
    return EventJournal(state / "journal.db")


def test_the_record_survives_a_restart_and_a_restored_state_directory(tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = journal(state)
    store = JournalFaultStore(first)
    faults = FaultRecorder({0: UUID}.get, store.save, store.load())
    storm(faults, T0)
    kept = faults.records[UUID]
    first.close()
    restored = tmp_path / "restored"
    shutil.copytree(state, restored)  # a backup put back on a new machine
    for directory in (state, restored):
        again = journal(directory)
        loaded = JournalFaultStore(again).load()
        assert loaded == {UUID: kept}
        # The next burst's Xid continues the burst it left (within the quiet spell).
        faults = FaultRecorder({0: UUID}.get, JournalFaultStore(again).save, loaded)
        sweep(faults, T0 + 121_000, (48,))
        assert faults.records[UUID].incidents[0].count == 51
        again.close()


@pytest.mark.parametrize("body", [
    b"not json", b"[]", b'{"version": 2}', b'{"version": 1, "uuid": "", "gpu_index": 0, '
    b'"incidents": []}',
    b'{"version": 1, "uuid": "GPU-x", "gpu_index": 0, "incidents": [{"kind": "xid"}]}',
    b'{"version": 1, "uuid": "GPU-x", "gpu_index": "0", "incidents": []}',
    b'{"version": 1, "uuid": "GPU-x", "gpu_index": 0, "incidents": [{"kind": "xid", '
    b'"state": "ON_FIRE", "started_ms": 0, "last_ms": 0, "count": 1, "codes": [], '
    b'"ended": false}]}',
])  # fmt: skip
def test_a_corrupt_record_is_refused_and_costs_no_other(tmp_path: Path, body: bytes) -> None:
    with pytest.raises((ValueError, KeyError, TypeError)):
        faults_from_body(body)
    db = journal(tmp_path / "state")
    store = JournalFaultStore(db)
    good = GpuFaults(UUID, 0, (Incident(XID, HealthState.NEEDS_RESET, T0, T0, 2, (48,)),))
    store.save(good)
    db.close()
    with sqlite3.connect(tmp_path / "state" / "journal.db") as raw:  # the file damaged by hand
        raw.execute("INSERT INTO records (kind, id, active, updated_ms, body) "
                    "VALUES (?, 'GPU-bad', 1, 0, ?)", (KIND, body))  # fmt: skip
    db = journal(tmp_path / "state")
    assert JournalFaultStore(db).load() == {UUID: good}
    db.close()


def test_the_body_is_json_a_person_can_read() -> None:
    record = GpuFaults(UUID, 3, (Incident(XID, HealthState.NEEDS_RESET, T0, T0 + 5, 2, (48,)),))
    text = faults_body(record).decode()
    assert '"kind": "xid"' in text and '"state": "NEEDS_RESET"' in text
    assert faults_from_body(text.encode()) == record
