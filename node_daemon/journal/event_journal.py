"""EventJournal: the node's events and alerts in SQLite (WAL), durable across restarts.

Events get their sequence number from SQLite (AUTOINCREMENT never reuses one),
so a subscriber that resumes after the last number it saw misses nothing and
sees nothing twice, even across a daemon crash. Each batch of events and the
alerts they change are written in one transaction.

On a full state disk the journal serves what it has and refuses changes
(JournalError "state disk full: ..."); the alert engine's observations are held
in memory instead (`record_or_hold`, bounded) and written, in the order they
were made, before anything else once there is room, so that events in seq
order stay in time order. The meta table also keeps a copy of the audit log's
head (`save_audit_head`), so that `gpufleet audit verify` sees a shortened log.

What it stores, and why events stay messages: reservations, workloads and
silences are opaque `StoredRecord` bodies here, serialized and read back by the
layer that owns them (node_daemon.control.wire, node_daemon.alerts.silence_book),
so the journal needs no knowledge of their types; `keep_inactive` bounds how
many ended ones of a kind are kept. Events and alerts are kept as gpufleet.v1 messages, as they are
stored and sent. An event is never changed once written, and StreamEvents
sends each one to every subscriber as it comes out of SQLite: a typed event
record would cost a conversion back to the message per subscriber per event,
and the journal, below alerts and control, could not build one that carries
their records without importing the layers above it. So the daemon's own
state is typed records (AlertRecord, Reservation, Workload) and events are
the wire messages that describe its changes, built once, by whoever makes the
change, from those records.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from gpufleet.v1 import node_pb2 as pb
from node_daemon.journal import subjects
from node_daemon.journal.schema_version import FileSchema, stamp_only
from node_daemon.journal.sqlite_state import StateDb, StateFile, open_for_reading

log = logging.getLogger(__name__)
T = TypeVar("T")

SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    time_ms INTEGER NOT NULL,
    kind INTEGER NOT NULL,
    body BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS alerts (
    id TEXT PRIMARY KEY,
    firing INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL,
    body BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS alerts_by_state ON alerts (firing, updated_ms);
CREATE INDEX IF NOT EXISTS events_by_time ON events (time_ms);
CREATE TABLE IF NOT EXISTS records (
    kind TEXT NOT NULL,
    id TEXT NOT NULL,
    active INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL,
    body BLOB NOT NULL,
    PRIMARY KEY (kind, id)
);
"""
    + subjects.SCHEMA
)
# Version 1: the layout of 0.1.0, the release before versions. The event_subjects table
# (node_daemon.journal.subjects) is derived from the events and made at open where it is
# missing, so an older daemon reads the file and a newer one catches the table up.
FILE_SCHEMA = FileSchema("event journal", (stamp_only,))
REPLAY_BATCH = 1000
PROBE = "SELECT 1 FROM meta, events, alerts, records LIMIT 0"
AUDIT_HEAD_KEY = "audit_head"
# Events held in memory while the disk is full: the first hours of a bad spell
# at a few events a minute. Past this, events are dropped (counted, logged) but
# the alerts' latest state is still kept, so nothing firing is forgotten.
MAX_HELD_EVENTS = 10_000
# N of a record id "<prefix>-N", in SQL.
_ID_NUMBER = "CAST(substr(id, instr(id, '-') + 1) AS INTEGER)"


@dataclass(frozen=True)
class StoredRecord:
    """A reservation, workload or silence as stored next to the events that change it.

    `body` is the record's serialized gpufleet.v1 message (the format state
    directories hold), made and read by node_daemon.control.wire only.
    """

    kind: str
    id: str
    active: bool
    updated_ms: int
    body: bytes


class JournalError(Exception):
    """The journal could not be written (disk full, read-only, corrupt)."""


@dataclass
class HeldBatches:
    """What the alert engine saw while the journal could not be written, in order."""

    events: list[pb.Event] = field(default_factory=list)
    alerts: dict[str, pb.Alert] = field(default_factory=dict)  # latest state per alert
    records: dict[tuple[str, str], StoredRecord] = field(default_factory=dict)  # likewise
    dropped: int = 0

    def __bool__(self) -> bool:
        return bool(self.events or self.alerts or self.records)

    def add(
        self,
        events: Sequence[pb.Event],
        alerts: Sequence[pb.Alert],
        records: Sequence[StoredRecord] = (),
    ) -> None:
        room = max(0, MAX_HELD_EVENTS - len(self.events))
        if len(events) > room and not self.dropped:
            log.error(
                "more than %d events held while the journal cannot be written: newer "
                "events are dropped (alert states are kept)",
                MAX_HELD_EVENTS,
            )
        self.events.extend(events[:room])
        self.dropped += max(0, len(events) - room)
        self.alerts.update((a.id, a) for a in alerts)
        self.records.update(((r.kind, r.id), r) for r in records)


class EventJournal(StateFile):
    """Thread-safe: one connection behind a lock; waiters are woken on every commit."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self._committed = threading.Condition(self._lock)
        self._closed = False
        self._held = HeldBatches()
        self._audit_head: tuple[int, str] | None = None
        self._audit_head_saved = True
        self._keep_inactive: dict[str, int] = {}
        self._subjects_through = 0  # the seq event_subjects reaches
        self.journal_id = uuid.uuid4().hex  # kept if the file has none yet
        with self._lock:
            self._state = StateDb(path, "event journal", self._prepare, SCHEMA, PROBE,
                                  layout=FILE_SCHEMA)  # fmt: skip
            self._load()

    def _prepare(self, db: sqlite3.Connection) -> None:
        db.execute("PRAGMA journal_mode=WAL")
        # FULL: an event the daemon has sent is on disk, even after power loss.
        db.execute("PRAGMA synchronous=FULL")
        db.executescript(SCHEMA)
        db.execute("INSERT OR IGNORE INTO meta VALUES ('journal_id', ?)", (self.journal_id,))

    def _load(self) -> None:
        """Journal id, last seq and audit head from the file (again after a reopen)."""
        row = self._db.execute("SELECT value FROM meta WHERE key = 'journal_id'").fetchone()
        self.journal_id = str(row[0]) if row else self.journal_id
        self._last_seq = self._db.execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()[0]
        stored = _parse_head(self._db)
        if stored is not None and (self._audit_head is None or stored[0] >= self._audit_head[0]):
            self._audit_head, self._audit_head_saved = stored, True
        if not self._state.read_only:
            self._catch_up_subjects()

    def _catch_up_subjects(self) -> None:
        """Index the events event_subjects does not reach yet (a journal from before it,
        or one an older daemon wrote to since); the writes that follow index their own."""
        try:
            done = subjects.catch_up(self._db, int(self._last_seq))
        except sqlite3.Error as exc:  # a full disk: the readers decode what is not indexed
            log.warning("event journal %s: its events' subjects not indexed yet (%s); "
                        "state-at-a-moment reads decode them instead", self.path, exc)  # fmt: skip
        else:
            if done:
                log.info("event journal %s: %d events indexed by subject", self.path, done)
        self._subjects_through = subjects.indexed_through(self._db)

    @property
    def last_seq(self) -> int:
        with self._lock:
            return int(self._last_seq)

    @property
    def held_events(self) -> int:
        """Events held in memory until the journal can be written."""
        with self._lock:
            return len(self._held.events)

    def _problem_text(self) -> str | None:
        problem = self._state.problem
        if problem is None or not self._held:
            return problem
        return f"{problem}; {len(self._held.events)} events held in memory until there is room"

    def record(
        self,
        events: Sequence[pb.Event],
        alerts: Sequence[pb.Alert] = (),
        records: Sequence[StoredRecord] = (),
    ) -> list[pb.Event]:
        """Append events, upsert alerts and records in one transaction; events get their seq."""
        if not events and not alerts and not records:
            return []
        with self._lock:
            try:
                return self._write_in_order(events, alerts, records)
            except sqlite3.Error as exc:
                raise JournalError(self._problem_text() or str(exc)) from exc

    def record_or_hold(
        self,
        events: Sequence[pb.Event],
        alerts: Sequence[pb.Alert],
        records: Sequence[StoredRecord] = (),
    ) -> None:
        """Record what the node observed, or hold it in memory while the journal cannot be
        written; held batches are written first, in order, once it can (by any write)."""
        with self._lock:
            nothing = not events and not alerts and not records
            if nothing and not self._held and not self._state.read_only:
                return
            try:
                self._write_in_order(events, alerts, records)
            except sqlite3.Error:
                self._held.add(events, alerts, records)

    def keep_inactive(self, kind: str, newest: int) -> None:
        """Bound the inactive records of `kind` (ids "<prefix>-N"): each write of that kind
        keeps the `newest` by N and deletes older ones, in the same transaction."""
        with self._lock:
            self._keep_inactive[kind] = newest

    def _write_in_order(
        self,
        events: Sequence[pb.Event],
        alerts: Sequence[pb.Alert],
        records: Sequence[StoredRecord],
    ) -> list[pb.Event]:
        """Held batches first, then these; sqlite3.Error (problem noted) when it fails."""
        was_read_only = self._state.read_only
        if not self._state.reopen_if_due():
            raise sqlite3.OperationalError(self._state.problem)
        if was_read_only:
            self._load()  # reopened: the file may hold more than the read-only view showed
        elif self._subjects_through < self._last_seq:
            self._catch_up_subjects()
        flushed = False
        try:
            flushed = self._flush_held()
            stored = self._write(events, alerts, records) if events or alerts or records else []
        except sqlite3.Error as exc:
            self._rollback()
            self._state.failed(exc)
            raise
        finally:
            if flushed:
                self._committed.notify_all()
        self._state.succeeded()
        if stored:
            self._committed.notify_all()
        return stored

    def _flush_held(self) -> bool:
        if not self._held:
            return False
        held = self._held
        self._write(held.events, list(held.alerts.values()), list(held.records.values()))
        if held.dropped:
            log.error("%d events of the full-disk spell were dropped (alert states kept)",
                      held.dropped)  # fmt: skip
        log.warning("%d events held while the journal could not be written are written now",
                    len(held.events))  # fmt: skip
        self._held = HeldBatches()
        return True

    def _write(
        self,
        events: Sequence[pb.Event],
        alerts: Sequence[pb.Alert],
        records: Sequence[StoredRecord],
    ) -> list[pb.Event]:
        self._db.execute("BEGIN IMMEDIATE")
        stored = []
        for event in events:
            cursor = self._db.execute(
                "INSERT INTO events (time_ms, kind, body) VALUES (?, ?, ?)",
                (event.time_unix_ms, event.kind, event.SerializeToString()),
            )
            copy = pb.Event()
            copy.CopyFrom(event)
            copy.seq, copy.journal_id = int(cursor.lastrowid or 0), self.journal_id
            stored.append(copy)
        caught_up = bool(stored) and self._subjects_through >= self._last_seq
        if caught_up:
            subjects.write_rows(self._db, subjects.index_rows(stored), stored[-1].seq)
        self._db.executemany(
            "INSERT OR REPLACE INTO alerts (id, firing, updated_ms, body) VALUES (?, ?, ?, ?)",
            [
                (a.id, a.state == pb.ALERT_STATE_FIRING, a.updated_unix_ms, a.SerializeToString())
                for a in alerts
            ],
        )
        self._db.executemany(
            "INSERT OR REPLACE INTO records (kind, id, active, updated_ms, body) "
            "VALUES (?, ?, ?, ?, ?)",
            [(r.kind, r.id, int(r.active), r.updated_ms, r.body) for r in records],
        )
        for kind in {r.kind for r in records if not r.active} & set(self._keep_inactive):
            self._db.execute(
                f"DELETE FROM records WHERE kind = ?1 AND active = 0 AND id NOT IN ("
                f"SELECT id FROM records WHERE kind = ?1 AND active = 0 "
                f"ORDER BY {_ID_NUMBER} DESC LIMIT ?2)",
                (kind, self._keep_inactive[kind]),
            )
        if not self._audit_head_saved and self._audit_head is not None:
            self._db.execute(
                "INSERT OR REPLACE INTO meta VALUES (?, ?)",
                (AUDIT_HEAD_KEY, _head_text(self._audit_head)),
            )
        self._db.execute("COMMIT")
        self._audit_head_saved = True
        if stored:
            self._last_seq = stored[-1].seq
        if caught_up:
            self._subjects_through = self._last_seq
        return stored

    def _rollback(self) -> None:
        with contextlib.suppress(sqlite3.Error):  # no transaction was open
            self._db.execute("ROLLBACK")

    def events_after(self, seq: int, limit: int = REPLAY_BATCH) -> list[pb.Event]:
        with self._lock:
            return self._read_after(seq, limit)

    def _read_after(self, seq: int, limit: int) -> list[pb.Event]:
        rows = self._db.execute(
            "SELECT seq, body FROM events WHERE seq > ? ORDER BY seq LIMIT ?", (seq, limit)
        ).fetchall()
        return self._decoded(rows)

    def events_between(
        self, since_ms: int, until_ms: int, kinds: Collection[int], limit: int
    ) -> tuple[list[pb.Event], bool]:
        """The events stamped within [since_ms, until_ms] of `kinds` (empty: every kind),
        oldest first: the newest `limit` of them, and whether older ones were left out."""
        where, args = "time_ms BETWEEN ? AND ?", [since_ms, until_ms]
        if kinds:
            where += f" AND kind IN ({', '.join('?' * len(kinds))})"
            args += list(kinds)
        newest: list[pb.Event] = []
        with self._lock:
            rows = self._db.execute(
                f"SELECT seq, body FROM events WHERE {where} ORDER BY seq DESC", args
            )
            # A damaged row is passed over (_decoded), so rows are read until limit + 1
            # readable ones are found: the +1 only says that more were there.
            while len(newest) <= limit and (batch := rows.fetchmany(limit + 1 - len(newest))):
                newest += self._decoded(batch)
            rows.close()
        return newest[:limit][::-1], len(newest) > limit

    def _decoded(self, rows: Sequence[tuple[int, bytes]]) -> list[pb.Event]:
        events = []
        for row_seq, body in rows:
            event = subjects.decoded(body)
            if event.kind == pb.EVENT_KIND_UNSPECIFIED:  # damaged on disk: passed over
                log.warning("event journal %s: event %d unreadable, left out", self.path, row_seq)
                continue
            event.seq, event.journal_id = row_seq, self.journal_id
            events.append(event)
        return events

    def wait_after(self, seq: int, timeout_s: float) -> list[pb.Event]:
        """Events after `seq`, waiting up to timeout_s for the first; [] on timeout."""
        with self._lock:
            self._committed.wait_for(lambda: self._closed or self._last_seq > seq, timeout_s)
            return [] if self._closed else self._read_after(seq, REPLAY_BATCH)

    def wake(self) -> None:
        """Wake every waiting stream (one was cancelled; each checks whether it is still wanted)."""
        with self._lock:
            self._committed.notify_all()

    def alerts(self, firing: bool, limit: int = 1000) -> list[pb.Alert]:
        """Firing alerts, or cleared ones newest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT body FROM alerts WHERE firing = ? ORDER BY updated_ms DESC LIMIT ?",
                (int(firing), limit),
            ).fetchall()
        return [pb.Alert.FromString(body) for (body,) in rows]

    def readable_records(self, kind: str, parse: Callable[[bytes], T], what: str) -> list[T]:
        """A kind's records, each parsed; one that cannot be read is logged as `what` and
        left out: one bad record must not cost the others (nor the daemon its start)."""
        parsed = []
        for body in self.records(kind, active_only=False):
            try:
                parsed.append(parse(body))
            except (ValueError, KeyError, TypeError) as exc:
                log.error("%s in the journal cannot be read, ignored: %s", what, exc)
        return parsed

    def records(self, kind: str, active_only: bool) -> list[bytes]:
        """Stored record bodies of a kind (reservations, workloads), oldest update first."""
        query = "SELECT body FROM records WHERE kind = ?" + (
            " AND active = 1" if active_only else ""
        )
        with self._lock:
            rows = self._db.execute(query + " ORDER BY updated_ms", (kind,)).fetchall()
        return [body for (body,) in rows]

    def highest_record_number(self, kind: str) -> int:
        """The largest N of the ids "<prefix>-N" of a kind's records, 0 if none.

        keep_inactive deletes by N, oldest first, and never an active record, so the
        largest N stays stored: numbers are never reused.
        """
        with self._lock:
            row = self._db.execute(
                f"SELECT MAX({_ID_NUMBER}) FROM records WHERE kind = ?", (kind,)
            ).fetchone()
        return int(row[0] or 0)

    def alert(self, alert_id: str) -> pb.Alert | None:
        """One stored alert, firing or cleared."""
        with self._lock:
            row = self._db.execute("SELECT body FROM alerts WHERE id = ?", (alert_id,)).fetchone()
        return pb.Alert.FromString(row[0]) if row else None

    # -- a past moment (node_daemon.journal.subjects) -----------------------------

    def events_counting_at(self, wanted: Collection[str], at_ms: int) -> dict[str, pb.Event]:
        """Each subject's event that counts at `at_ms`: of its events stamped at or before
        it, the latest in the journal. Subjects with none are left out."""
        with self._lock:
            seqs = subjects.counting_at(self._db, wanted, at_ms)
            found = {}
            for subject, seq in seqs.items():
                row = self._db.execute("SELECT body FROM events WHERE seq = ?", (seq,)).fetchone()
                if row is not None:
                    event = subjects.decoded(row[0])  # damaged: about nothing, left out
                    if subjects.subjects_of(event):
                        event.seq, event.journal_id = seq, self.journal_id
                        found[subject] = event
        return found

    def alert_ids_since(self, at_ms: int) -> list[str]:
        """Alerts that may have fired at `at_ms`: firing now, or cleared at or after it."""
        with self._lock:
            rows = self._db.execute(
                "SELECT id FROM alerts WHERE firing = 1 "
                "UNION SELECT id FROM alerts WHERE firing = 0 AND updated_ms >= ?",
                (at_ms,),
            ).fetchall()
        return [str(alert_id) for (alert_id,) in rows]

    def record_ids_since(self, kind: str, at_ms: int) -> list[str]:
        """Records of a kind that may have been in force at `at_ms`: active now, or last
        changed at or after it (a record's update time is its last event's)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT id FROM records WHERE kind = ? AND (active = 1 OR updated_ms >= ?)",
                (kind, at_ms),
            ).fetchall()
        return [str(record_id) for (record_id,) in rows]

    def highest_alert_number(self) -> int:
        """The largest N of the alert ids "a-N" stored, 0 if none."""
        with self._lock:
            row = self._db.execute(
                "SELECT MAX(CAST(substr(id, 3) AS INTEGER)) FROM alerts"
            ).fetchone()
        return int(row[0] or 0)

    # -- the audit log's anchor -------------------------------------------------

    @property
    def audit_head(self) -> tuple[int, str] | None:
        """The newest audit record (seq, hash) this journal has seen; None if none yet."""
        with self._lock:
            return self._audit_head

    def save_audit_head(self, seq: int, digest: str) -> None:
        """Keep the audit log's head (never moving back); written now, or with the next
        write when the disk is full. Never raises: the audit record itself is written."""
        with self._lock:
            if self._audit_head is not None and seq <= self._audit_head[0]:
                return
            self._audit_head, self._audit_head_saved = (seq, digest), False
            if self._state.read_only or self._closed:
                return
            try:
                self._db.execute(
                    "INSERT OR REPLACE INTO meta VALUES (?, ?)",
                    (AUDIT_HEAD_KEY, _head_text((seq, digest))),
                )
                self._audit_head_saved = True
            except sqlite3.Error as exc:
                log.warning("audit head %d not kept in the journal yet: %s", seq, exc)

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._held:
                log.error("%d events held for a full disk are lost at stop", len(self._held.events))
            self._committed.notify_all()
            self._state.close()


def _head_text(head: tuple[int, str]) -> str:
    return f"{head[0]} {head[1]}"


def _parse_head(db: sqlite3.Connection) -> tuple[int, str] | None:
    row = db.execute("SELECT value FROM meta WHERE key = ?", (AUDIT_HEAD_KEY,)).fetchone()
    if not row:
        return None
    seq, _, digest = str(row[0]).partition(" ")
    return (int(seq), digest) if seq.isdigit() and digest else None


def read_audit_head(path: Path) -> tuple[int, str] | None:
    """The audit head kept in the journal file at `path`, read without writing to it."""
    db = open_for_reading(path, PROBE, SCHEMA)
    try:
        return _parse_head(db)
    finally:
        db.close()
