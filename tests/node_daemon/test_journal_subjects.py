"""The journal's events by subject (node_daemon.journal.subjects): which event counts at
a moment when the clock was stepped back, and a journal from before the index."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from gpufleet.v1 import node_pb2 as pb
from node_daemon.journal import subjects
from node_daemon.journal.event_journal import EventJournal

ALERT = subjects.alert_subject("a-1")


def alert_event(kind: int, at_ms: int, **alert: object) -> pb.Event:
    state = pb.ALERT_STATE_CLEARED if kind == pb.EVENT_KIND_ALERT_CLEARED else pb.ALERT_STATE_FIRING
    return pb.Event(time_unix_ms=at_ms, kind=kind,  # type: ignore[arg-type]
                    alert=pb.Alert(id="a-1", rule="gpu_temp", state=state, **alert))  # fmt: skip


def stepped_journal(path: Path) -> EventJournal:
    """a-1 raised at 2000; the clock then stepped back 600 ms: acknowledged at 1500, and
    cleared at 1900; a reservation made at 1000 and a GPU drained at 1700 after it."""
    journal = EventJournal(path)
    journal.record([alert_event(pb.EVENT_KIND_ALERT_RAISED, 2000)])
    journal.record([alert_event(pb.EVENT_KIND_ALERT_ACKNOWLEDGED, 1500, acknowledged_by="ann")])
    journal.record([alert_event(pb.EVENT_KIND_ALERT_CLEARED, 1900, acknowledged_by="ann")])
    journal.record([pb.Event(time_unix_ms=1000, kind=pb.EVENT_KIND_RESERVATION_MADE,
                             reservation=pb.Reservation(id="r-1", active=True))])  # fmt: skip
    journal.record([pb.Event(time_unix_ms=1700, kind=pb.EVENT_KIND_GPU_DRAINED,
                             condition=pb.GpuCondition(gpu_index=3, drained=True))])  # fmt: skip
    return journal


def kinds_at(journal: EventJournal, at_ms: int) -> dict[str, int]:
    wanted = [ALERT, "reservation:r-1", subjects.condition_subject(3)]
    return {s: e.kind for s, e in journal.events_counting_at(wanted, at_ms).items()}


def test_after_a_clock_step_back_the_later_record_wins(tmp_path: Path) -> None:
    journal = stepped_journal(tmp_path / "journal.sqlite3")
    try:
        assert kinds_at(journal, 999) == {}
        assert kinds_at(journal, 1600)[ALERT] == pb.EVENT_KIND_ALERT_ACKNOWLEDGED
        # 2000: the raise counts, but the clear (stamped 1900, written after it) wins.
        assert kinds_at(journal, 2000) == {
            ALERT: pb.EVENT_KIND_ALERT_CLEARED,
            "reservation:r-1": pb.EVENT_KIND_RESERVATION_MADE,
            "condition:3": pb.EVENT_KIND_GPU_DRAINED,
        }
        assert kinds_at(journal, 1899)[ALERT] == pb.EVENT_KIND_ALERT_ACKNOWLEDGED
        counted = journal.events_counting_at([ALERT], 1600)[ALERT]
        assert counted.seq == 2 and counted.alert.acknowledged_by == "ann"
    finally:
        journal.close()


def test_a_journal_from_before_the_index_is_indexed_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    stepped_journal(path).close()
    with sqlite3.connect(path) as db:  # as a daemon from before the index left it
        db.execute("DROP TABLE event_subjects")
        db.execute("DELETE FROM meta WHERE key = ?", (subjects.THROUGH_KEY,))
    with sqlite3.connect(path) as db:
        assert subjects.indexed_through(db) == 0
        # Read where the table is missing (a read-only journal): the events are decoded.
        assert subjects.counting_at(db, [ALERT], 1600) == {ALERT: 2}
    journal = EventJournal(path)
    try:
        assert kinds_at(journal, 2000)[ALERT] == pb.EVENT_KIND_ALERT_CLEARED
        journal.record([alert_event(pb.EVENT_KIND_ALERT_RAISED, 3000)])
        assert kinds_at(journal, 3000)[ALERT] == pb.EVENT_KIND_ALERT_RAISED
    finally:
        journal.close()
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT subject, seq FROM event_subjects ORDER BY seq").fetchall()
        assert subjects.indexed_through(db) == 6
    assert rows == [(ALERT, 1), (ALERT, 2), (ALERT, 3), ("reservation:r-1", 4),
                    ("condition:3", 5), (ALERT, 6)]  # fmt: skip


def test_only_events_about_a_subject_are_indexed() -> None:
    started = pb.Event(kind=pb.EVENT_KIND_DAEMON_STARTED, summary="daemon started")
    lost = pb.Event(kind=pb.EVENT_KIND_GPU_LOST, gpu_index=2)
    health = pb.Event(kind=pb.EVENT_KIND_GPU_HEALTH_CHANGED,
                      condition=pb.GpuCondition(gpu_index=0))  # fmt: skip
    assert subjects.subjects_of(started) == []
    assert subjects.subjects_of(lost) == ["bus:2"]
    assert subjects.subjects_of(health) == ["condition:0"]


def test_a_damaged_event_neither_stops_the_start_nor_a_moment(tmp_path: Path) -> None:
    """One bad row must not keep the daemon down: an older journal whose second event was
    damaged on disk is indexed at open all the same, and moments read past it."""
    path = tmp_path / "journal.sqlite3"
    stepped_journal(path).close()
    with sqlite3.connect(path) as db:  # an older daemon's journal, one body damaged
        db.execute("DROP TABLE event_subjects")
        db.execute("DELETE FROM meta WHERE key = ?", (subjects.THROUGH_KEY,))
        db.execute("UPDATE events SET body = ? WHERE seq = 2", (b"\xff\xff\xff\x07",))
    journal = EventJournal(path)  # no exception: the start goes on
    try:
        # The ack (seq 2) is unreadable: at 1600 no alert event counts, the rest does.
        assert kinds_at(journal, 1600) == {"reservation:r-1": pb.EVENT_KIND_RESERVATION_MADE}
        assert kinds_at(journal, 2000)[ALERT] == pb.EVENT_KIND_ALERT_CLEARED
        # A console's replay of the journal (StreamEvents) goes on past it too.
        assert [e.seq for e in journal.events_after(0)] == [1, 3, 4, 5]
    finally:
        journal.close()
    with sqlite3.connect(path) as db:
        assert subjects.indexed_through(db) == 5  # read past it
        # The damaged row counted as a moment's event (a read-only journal) is passed over.
        db.execute("DELETE FROM event_subjects WHERE seq = 1")
        assert subjects.counting_at(db, [ALERT], 2000) == {ALERT: 3}
