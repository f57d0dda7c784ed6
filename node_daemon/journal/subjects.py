"""What each journal event is about, kept beside the events: the state of any moment is
then a few index lookups, never a scan of the journal from its start.

A subject is an alert ("alert:a-7"), a reservation ("reservation:r-3"), a workload
("workload:w-12"), a GPU's condition ("condition:2": its health state and drain, from
GPU_HEALTH_CHANGED, GPU_DRAINED and GPU_UNDRAINED) or a GPU's bus ("bus:2": GPU_LOST,
GPU_RECOVERED). Every such event carries its subject's whole state after it (the alert,
the reservation, the workload, the condition), so a subject's state at T is the one its
event that counts at T carries.

Which event counts at T: of the subject's events stamped at or before T, the latest in
the journal (the highest seq). Seq is the order the node did things in; the stamps are
the wall clock, which may have been stepped back, and then the later record wins even
where its stamp is the earlier one.

The side table `event_subjects (subject, seq, time_ms)` gains its rows in the
transaction that writes the events. A journal written before it existed (or by an older
daemon since) is indexed when it is opened for writing; meta's `subjects_seq` says how
far the table reaches, and a reader covers events past it by decoding them (a read-only
journal on a full disk).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Iterable

from google.protobuf.message import DecodeError

from gpufleet.v1 import node_pb2 as pb

SCHEMA = """
CREATE TABLE IF NOT EXISTS event_subjects (
    subject TEXT NOT NULL,
    seq INTEGER NOT NULL,
    time_ms INTEGER NOT NULL,
    PRIMARY KEY (subject, seq)
) WITHOUT ROWID;
"""
THROUGH_KEY = "subjects_seq"
# Events decoded and indexed per transaction when an older journal is caught up.
CATCH_UP_BATCH = 5000
_CONDITION_KINDS = frozenset({
    pb.EVENT_KIND_GPU_HEALTH_CHANGED, pb.EVENT_KIND_GPU_DRAINED, pb.EVENT_KIND_GPU_UNDRAINED,
})  # fmt: skip
_BUS_KINDS = frozenset({pb.EVENT_KIND_GPU_LOST, pb.EVENT_KIND_GPU_RECOVERED})
_INSERT = "INSERT OR IGNORE INTO event_subjects VALUES (?, ?, ?)"


def alert_subject(alert_id: str) -> str:
    return f"alert:{alert_id}"


def record_subject(kind: str, record_id: str) -> str:
    """A reservation's or workload's subject: its record kind and id."""
    return f"{kind}:{record_id}"


def condition_subject(gpu: int) -> str:
    return f"condition:{gpu}"


def bus_subject(gpu: int) -> str:
    return f"bus:{gpu}"


def subjects_of(event: pb.Event) -> list[str]:
    """The subjects an event is about (none for a daemon start, a kill, a reload)."""
    found = []
    if event.HasField("alert") and event.alert.id:
        found.append(alert_subject(event.alert.id))
    if event.HasField("reservation") and event.reservation.id:
        found.append(record_subject("reservation", event.reservation.id))
    if event.HasField("workload") and event.workload.id:
        found.append(record_subject("workload", event.workload.id))
    if event.kind in _CONDITION_KINDS and event.HasField("condition"):
        found.append(condition_subject(event.condition.gpu_index))
    if event.kind in _BUS_KINDS and event.HasField("gpu_index"):
        found.append(bus_subject(event.gpu_index))
    return found


def index_rows(events: Iterable[pb.Event]) -> list[tuple[str, int, int]]:
    """(subject, seq, time) rows of events that carry their seq."""
    return [(s, e.seq, e.time_unix_ms) for e in events for s in subjects_of(e)]


def indexed_through(db: sqlite3.Connection) -> int:
    """The seq up to which event_subjects holds every event's rows (0: none, or no table)."""
    try:
        row = db.execute("SELECT value FROM meta WHERE key = ?", (THROUGH_KEY,)).fetchone()
    except sqlite3.Error:
        return 0
    return int(row[0]) if row and str(row[0]).isdigit() else 0


def write_rows(db: sqlite3.Connection, rows: list[tuple[str, int, int]], through: int) -> None:
    """Add rows and say the table reaches `through` (inside the caller's transaction)."""
    db.executemany(_INSERT, rows)
    db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (THROUGH_KEY, str(through)))


def catch_up(db: sqlite3.Connection, last_seq: int) -> int:
    """Index the events after what the table reaches, a batch per transaction; how many."""
    through, done = indexed_through(db), 0
    while through < last_seq:
        batch = _decoded_after(db, through, CATCH_UP_BATCH)
        if not batch:
            break
        through = batch[-1].seq
        db.execute("BEGIN IMMEDIATE")
        try:
            write_rows(db, index_rows(batch), through)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        done += len(batch)
    return done


def _decoded_after(db: sqlite3.Connection, seq: int, limit: int) -> list[pb.Event]:
    """The events after `seq`, a damaged one as an event about nothing: it is passed over
    (its seq still counts as read), never the end of the daemon's start or of a moment."""
    rows = db.execute(
        "SELECT seq, time_ms, body FROM events WHERE seq > ? ORDER BY seq LIMIT ?", (seq, limit)
    ).fetchall()
    events = []
    for row_seq, time_ms, body in rows:
        event = decoded(body)
        event.seq, event.time_unix_ms = row_seq, time_ms
        events.append(event)
    return events


def decoded(body: bytes) -> pb.Event:
    """An event's stored body; a damaged one (a disk's bit flip, an edit) as an empty
    event, which is about no subject."""
    try:
        return pb.Event.FromString(body)
    except (DecodeError, TypeError):
        return pb.Event()


def counting_at(db: sqlite3.Connection, subjects: Collection[str], at_ms: int) -> dict[str, int]:
    """Each subject's seq that counts at `at_ms` (see the module); subjects with none left out.

    One index range per subject, over that subject's own events only.
    """
    through = indexed_through(db)
    found: dict[str, int] = {}
    if through:
        query = "SELECT MAX(seq) FROM event_subjects WHERE subject = ? AND time_ms <= ?"
        for subject in subjects:
            row = db.execute(query, (subject, at_ms)).fetchone()
            if row and row[0] is not None:
                found[subject] = int(row[0])
    wanted = set(subjects)
    # Events the table does not reach yet (a read-only journal written by an older daemon).
    while batch := _decoded_after(db, through, CATCH_UP_BATCH):
        for subject, seq, time_ms in index_rows(batch):
            if subject in wanted and time_ms <= at_ms:
                found[subject] = max(found.get(subject, 0), seq)
        through = batch[-1].seq
    return found
