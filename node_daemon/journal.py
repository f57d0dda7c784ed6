"""EventJournal: the node's events and alerts in SQLite (WAL), durable across restarts.

Events get their sequence number from SQLite (AUTOINCREMENT never reuses one),
so a subscriber that resumes after the last number it saw misses nothing and
sees nothing twice, even across a daemon crash. Each batch of events and the
alerts they change are written in one transaction.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gpufleet.v1 import node_pb2 as pb

log = logging.getLogger(__name__)

SCHEMA = """
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
CREATE TABLE IF NOT EXISTS records (
    kind TEXT NOT NULL,
    id TEXT NOT NULL,
    active INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL,
    body BLOB NOT NULL,
    PRIMARY KEY (kind, id)
);
"""
REPLAY_BATCH = 1000


@dataclass(frozen=True)
class StoredRecord:
    """A reservation or workload as stored next to the events that change it."""

    kind: str
    id: str
    active: bool
    updated_ms: int
    body: bytes


class JournalError(Exception):
    """The journal could not be written (disk full, read-only, corrupt)."""


class EventJournal:
    """Thread-safe: one connection behind a lock; waiters are woken on every commit."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        self._committed = threading.Condition(self._lock)
        self._closed = False
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            # FULL: an event the daemon has sent is on disk, even after power loss.
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(SCHEMA)
            self.journal_id = self._ensure_journal_id()
            self._last_seq = self._db.execute(
                "SELECT COALESCE(MAX(seq), 0) FROM events"
            ).fetchone()[0]

    def _ensure_journal_id(self) -> str:
        row = self._db.execute("SELECT value FROM meta WHERE key = 'journal_id'").fetchone()
        if row:
            return str(row[0])
        journal_id = uuid.uuid4().hex
        self._db.execute("INSERT INTO meta VALUES ('journal_id', ?)", (journal_id,))
        return journal_id

    @property
    def last_seq(self) -> int:
        with self._lock:
            return int(self._last_seq)

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
                stored = self._write(events, alerts, records)
            except sqlite3.Error as exc:
                self._rollback()
                raise JournalError(f"cannot write the event journal {self.path}: {exc}") from exc
            self._committed.notify_all()
            return stored

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
        self._db.execute("COMMIT")
        if stored:
            self._last_seq = stored[-1].seq
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
        events = []
        for row_seq, body in rows:
            event = pb.Event.FromString(body)
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

    def records(self, kind: str, active_only: bool) -> list[bytes]:
        """Stored record bodies of a kind (reservations, workloads), oldest update first."""
        query = "SELECT body FROM records WHERE kind = ?" + (
            " AND active = 1" if active_only else ""
        )
        with self._lock:
            rows = self._db.execute(query + " ORDER BY updated_ms", (kind,)).fetchall()
        return [body for (body,) in rows]

    def alert(self, alert_id: str) -> pb.Alert | None:
        """One stored alert, firing or cleared."""
        with self._lock:
            row = self._db.execute("SELECT body FROM alerts WHERE id = ?", (alert_id,)).fetchone()
        return pb.Alert.FromString(row[0]) if row else None

    def highest_alert_number(self) -> int:
        """The largest N of the alert ids "a-N" stored, 0 if none."""
        with self._lock:
            row = self._db.execute(
                "SELECT MAX(CAST(substr(id, 3) AS INTEGER)) FROM alerts"
            ).fetchone()
        return int(row[0] or 0)

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._committed.notify_all()
            self._db.close()
