"""The event journal in a real SQLite file: sequence numbers, restarts, a full disk."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from gpufleet.states import WorkloadState
from gpufleet.v1 import node_pb2 as pb
from node_daemon.control import wire
from node_daemon.control.reservations import KIND as RESERVATION
from node_daemon.control.reservations import ReservationLedger
from node_daemon.journal import event_journal as journal_module
from node_daemon.journal.event_journal import EventJournal, JournalError, StoredRecord


def event(n: int) -> pb.Event:
    return pb.Event(time_unix_ms=1000 + n, kind=pb.EVENT_KIND_GPU_LOST, summary=f"event {n}")


def test_sequence_numbers_survive_reopening(tmp_path: Path) -> None:
    journal = EventJournal(tmp_path / "j.sqlite3")
    first = journal.record([event(1), event(2)])
    journal_id = journal.journal_id
    journal.close()
    reopened = EventJournal(tmp_path / "j.sqlite3")
    more = reopened.record([event(3)])
    assert [e.seq for e in first + more] == [1, 2, 3]
    assert reopened.journal_id == journal_id and reopened.last_seq == 3
    assert [e.summary for e in reopened.events_after(1)] == ["event 2", "event 3"]
    reopened.close()


def test_alerts_are_upserted_with_their_events(tmp_path: Path) -> None:
    journal = EventJournal(tmp_path / "j.sqlite3")
    alert = pb.Alert(id="a-1", key="gpu_temp/gpu0", state=pb.ALERT_STATE_FIRING, updated_unix_ms=1)
    journal.record([event(1)], [alert])
    alert.state, alert.updated_unix_ms = pb.ALERT_STATE_CLEARED, 2
    journal.record([event(2)], [alert])
    assert journal.alerts(firing=True) == []
    assert [a.id for a in journal.alerts(firing=False)] == ["a-1"]
    assert journal.alert("a-1").state == pb.ALERT_STATE_CLEARED
    assert journal.highest_alert_number() == 1
    journal.close()


def test_wait_after_wakes_on_commit(tmp_path: Path) -> None:
    journal = EventJournal(tmp_path / "j.sqlite3")
    writer = threading.Timer(0.05, journal.record, args=([event(1)],))
    writer.start()
    got = journal.wait_after(0, timeout_s=10)
    writer.join()
    assert [e.seq for e in got] == [1]
    journal.close()


def test_full_disk_is_a_clear_error_and_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    journal = EventJournal(path)
    journal.record([event(0)])
    # SQLite's own limit on pages is a faithful full disk: SQLITE_FULL.
    pages = journal._db.execute("PRAGMA page_count").fetchone()[0]
    journal._db.execute(f"PRAGMA max_page_count = {pages}")
    big = pb.Event(time_unix_ms=1, kind=pb.EVENT_KIND_GPU_LOST, summary="x" * 200_000)
    with pytest.raises(JournalError, match="full"):
        journal.record([big])
    assert journal.last_seq == 1
    journal._db.execute("PRAGMA max_page_count = 1000000")
    stored = journal.record([event(2)])
    assert stored[0].seq == 2  # no hole, no duplicate
    journal.close()
    rows = sqlite3.connect(path).execute("SELECT seq FROM events ORDER BY seq").fetchall()
    assert rows == [(1,), (2,)]


def fill(journal: EventJournal) -> None:
    pages = journal._db.execute("PRAGMA page_count").fetchone()[0]
    journal._db.execute(f"PRAGMA max_page_count = {pages}")


def test_observations_held_on_a_full_disk_are_written_before_later_changes(
    tmp_path: Path,
) -> None:
    journal = EventJournal(tmp_path / "j.sqlite3")
    journal.record([event(0)])
    fill(journal)
    big = pb.Event(time_unix_ms=1001, kind=pb.EVENT_KIND_GPU_LOST, summary="x" * 200_000)
    journal.record_or_hold([big], [])
    assert journal.held_events == 1 and journal.last_seq == 1
    assert (journal.problem or "").startswith("state disk full: cannot write event journal")
    with pytest.raises(JournalError, match=r"state disk full: .*1 events held in memory"):
        journal.record([event(2)])
    journal._db.execute("PRAGMA max_page_count = 1000000")
    stored = journal.record([event(3)])
    assert stored[0].seq == 3 and journal.problem is None and journal.held_events == 0
    assert [(e.seq, e.time_unix_ms) for e in journal.events_after(0)] == [
        (1, 1000), (2, 1001), (3, 1003)
    ]  # fmt: skip
    journal.close()


def test_the_held_events_are_bounded_but_alert_states_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(journal_module, "MAX_HELD_EVENTS", 3)
    journal = EventJournal(tmp_path / "j.sqlite3")
    journal.record([event(0)])
    fill(journal)
    padding = "x" * 200_000  # one event too big for the page left: the write fails
    for n in range(5):
        alert = pb.Alert(id=f"a-{n % 2}", state=pb.ALERT_STATE_FIRING, updated_unix_ms=n)
        journal.record_or_hold([pb.Event(time_unix_ms=n, summary=padding)], [alert])
    assert journal.held_events == 3
    journal._db.execute("PRAGMA max_page_count = 1000000")
    journal.record_or_hold([], [])
    assert journal.last_seq == 4 and journal.held_events == 0
    assert {a.id: a.updated_unix_ms for a in journal.alerts(firing=True)} == {"a-0": 4, "a-1": 3}
    journal.close()


# Bodies as daemons before the typed records wrote them: every field set, optional
# ones at zero too (present, not absent), a map and repeated fields.
STORED_WORKLOAD = pb.Workload(
    id="w-7", name="train", argv=["python", "train.py"], env={"A": "1", "B": "two"},
    owner="team:ml", run_as="alice", gpu_count=2, min_free_memory_bytes=5, auto_place=True,
    state=pb.WORKLOAD_STATE_FAILED, gpu_indices=[1, 3], pid=4242, pid_start_unix_ms=0,
    queued_unix_ms=10, started_unix_ms=20, ended_unix_ms=30, exit_code=0, detail="d",
)  # fmt: skip
STORED_RESERVATION = pb.Reservation(
    id="r-3", gpu_indices=[0, 2], holder="bob", until_unix_ms=2**41, reason="paper",
    created_by="admin", created_unix_ms=5, active=True,
)  # fmt: skip


def test_stored_records_load_and_are_stored_back_as_the_same_messages() -> None:
    workload = wire.workload_from_body(STORED_WORKLOAD.SerializeToString())
    assert workload.state is WorkloadState.FAILED and workload.pid_start_unix_ms == 0
    assert workload.exit_code == 0 and workload.env == {"A": "1", "B": "two"}
    assert pb.Workload.FromString(wire.workload_body(workload)) == STORED_WORKLOAD
    queued = wire.workload_record(pb.Workload(id="w-1", state=pb.WORKLOAD_STATE_QUEUED))
    assert queued.pid is None and queued.exit_code is None and queued.started_unix_ms is None
    assert not wire.workload_message(queued).HasField("exit_code")
    reservation = wire.reservation_from_body(STORED_RESERVATION.SerializeToString())
    assert reservation.ended_unix_ms is None and reservation.gpu_indices == (0, 2)
    assert pb.Reservation.FromString(wire.reservation_body(reservation)) == STORED_RESERVATION


def test_a_workload_shown_without_its_environment_says_so() -> None:
    workload = wire.workload_record(STORED_WORKLOAD)
    hidden = wire.workload_message(workload, with_env=False)
    assert not hidden.env and hidden.env_hidden and list(hidden.argv) == ["python", "train.py"]
    no_env = wire.workload_message(wire.workload_record(pb.Workload(id="w-2", state=1)), False)
    assert not no_env.env_hidden  # nothing was left out


def test_a_ledger_loads_what_an_earlier_daemon_stored(tmp_path: Path) -> None:
    journal = EventJournal(tmp_path / "j.sqlite3")
    body = STORED_RESERVATION.SerializeToString()
    journal.record([], records=[StoredRecord(RESERVATION, "r-3", True, 5, body)])
    ledger = ReservationLedger(journal, lambda: 4, clock=lambda: 1.0)
    assert ledger.get("r-3") == wire.reservation_record(STORED_RESERVATION)
    assert ledger.holder_of(2) == ledger.get("r-3") and ledger.holder_of(1) is None
    released = ledger.release("r-3", "admin")
    assert not released.active and released.ended_unix_ms == 1000
    stored = [pb.Reservation.FromString(b) for b in journal.records(RESERVATION, False)]
    expected = pb.Reservation()
    expected.CopyFrom(STORED_RESERVATION)
    expected.active, expected.ended_unix_ms = False, 1000
    assert stored == [expected]
    again = ReservationLedger(journal, lambda: 4, clock=lambda: 2.0)
    assert again.active() == [] and again.reserve([0], "bob", 3000, "", "bob").id == "r-4"
    journal.close()
