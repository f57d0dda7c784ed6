"""The event journal in a real SQLite file: sequence numbers, restarts, a full disk."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from gpufleet.v1 import node_pb2 as pb
from node_daemon.journal import EventJournal, JournalError


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
