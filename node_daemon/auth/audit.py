"""AuditLog: who did what, from where, with what result — in SQLite, hash-chained.

Each record carries the hash of the one before it, so an edited, deleted or
reordered record breaks the chain and `gpufleet audit verify` names it. A
chain alone cannot show that its newest records were cut off, so the head
(seq and hash of the newest record) is also kept outside the audit file: in
the event journal's meta table (the anchor), in the daemon's log (one line per
HEAD_LOG_EVERY records or per minute, and at start and stop: journald under
systemd), and on /metrics (`gpufleet_audit_records_total`). A daemon that
finds its log shorter than the anchor says so and numbers on from the anchor,
so the gap stays in the chain for `gpufleet audit verify` to report.

Denied calls are recorded at a bounded rate: see node_daemon/auth/denials.py.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from node_daemon.auth.denials import DenialKind, DenialLimiter, Summary, peer_host
from node_daemon.journal.schema_version import FileSchema, stamp_only
from node_daemon.journal.sqlite_state import StateDb, StateFile

log = logging.getLogger(__name__)

SCHEMA = """
CREATE TABLE IF NOT EXISTS audit (
    seq INTEGER PRIMARY KEY,
    time_ms INTEGER NOT NULL,
    user TEXT NOT NULL,
    peer TEXT NOT NULL,
    method TEXT NOT NULL,
    target TEXT NOT NULL,
    params TEXT NOT NULL,
    result TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL
);
"""
GENESIS = "0" * 64
FIELDS = "seq, time_ms, user, peer, method, target, params, result, prev_hash, hash"
PROBE = "SELECT 1 FROM audit LIMIT 0"
# Version 1: the layout of 0.1.0, the release before versions. A migration must
# keep every row's hashed fields as they are, or the chain no longer verifies.
FILE_SCHEMA = FileSchema("audit log", (stamp_only,))
HEAD_LOG_EVERY = 100
HEAD_LOG_EVERY_S = 60.0
# A denied call's params and result are the caller's to choose: kept this short.
MAX_DENIAL_TEXT = 512
Head = tuple[int, str]


class AuditError(Exception):
    """The audit log cannot be written: destructive calls are refused until it can."""


class NotAnAuditLog(Exception):
    """The file to verify is no audit log (not SQLite, or no audit table)."""


class AuditAnchor(Protocol):
    """Where the audit head is kept apart from the audit file (the event journal)."""

    @property
    def audit_head(self) -> Head | None: ...

    def save_audit_head(self, seq: int, digest: str) -> None: ...


@dataclass(frozen=True)
class AuditEntry:
    seq: int
    time_ms: int
    user: str
    peer: str
    method: str
    target: str
    params: str
    result: str
    prev_hash: str
    hash: str


def entry_hash(seq: int, time_ms: int, user: str, peer: str, method: str, target: str,
               params: str, result: str, prev_hash: str) -> str:  # fmt: skip
    text = "\x1f".join(
        [prev_hash, str(seq), str(time_ms), user, peer, method, target, params, result]
    )
    return hashlib.sha256(text.encode()).hexdigest()


def _prepare(db: sqlite3.Connection) -> None:
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.executescript(SCHEMA)


class AuditLog(StateFile):
    """Thread-safe: one connection behind a lock.

    Args:
        path: the audit.sqlite3 file.
        anchor: keeps a copy of the head outside this file (the event journal).
        denials: how repeated denials are counted.
        clock: Unix seconds.
    """

    def __init__(self, path: Path, anchor: AuditAnchor | None = None,
                 denials: DenialLimiter | None = None,
                 clock: Callable[[], float] = time.time) -> None:  # fmt: skip
        super().__init__(path)
        self._anchor, self._clock = anchor, clock
        self._denials = denials or DenialLimiter()
        self._logged: tuple[int, float] = (0, 0.0)  # head seq last logged, and when
        with self._lock:
            self._state = StateDb(path, "audit log", _prepare, SCHEMA, PROBE, layout=FILE_SCHEMA)
            row = self._db.execute(
                "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1"
            ).fetchone()
            self._last_seq: int = int(row[0]) if row else 0
            self._last_hash: str = str(row[1]) if row else GENESIS
            self._check_anchor()
            self._log_head(force=True)

    @property
    def head(self) -> Head:
        """(seq, hash) of the newest record; (0, GENESIS) when there is none."""
        with self._lock:
            return self._last_seq, self._last_hash

    def _check_anchor(self) -> None:
        anchored = self._anchor.audit_head if self._anchor else None
        if anchored is None or anchored[0] <= self._last_seq:
            if anchored is not None and self._hash_of(anchored[0]) not in (anchored[1], None):
                log.error("audit record %d is not the one anchored in the event journal "
                          "(hash %s): the audit log was rewritten", *anchored)  # fmt: skip
            self._save_anchor()
            return
        log.error("audit log %s ends at record %d, but the event journal's anchor says it "
                  "reached record %d (hash %s): its newest records were deleted; new records "
                  "follow record %d, so the gap stays visible to `gpufleet audit verify`",
                  self.path, self._last_seq, anchored[0], anchored[1], anchored[0])  # fmt: skip
        self._last_seq, self._last_hash = anchored

    def _hash_of(self, seq: int) -> str | None:
        row = self._db.execute("SELECT hash FROM audit WHERE seq = ?", (seq,)).fetchone()
        return str(row[0]) if row else None

    def _save_anchor(self) -> None:
        if self._anchor is not None and self._last_seq:
            self._anchor.save_audit_head(self._last_seq, self._last_hash)

    def _log_head(self, force: bool = False) -> None:
        """One line with the head now and then: the system journal keeps a copy."""
        seq, when = self._logged
        now = self._clock()
        due = self._last_seq - seq >= HEAD_LOG_EVERY or now - when >= HEAD_LOG_EVERY_S
        if self._last_seq != seq and (force or due):
            log.info("audit head: record %d, hash %s", self._last_seq, self._last_hash)
            self._logged = (self._last_seq, now)

    def append(
        self, user: str, peer: str, method: str, target: str, params: str, result: str
    ) -> AuditEntry:
        with self._lock:
            self._summarise_due()
            return self._append(user, peer, method, target, params, result)

    def _append(
        self, user: str, peer: str, method: str, target: str, params: str, result: str
    ) -> AuditEntry:
        if not self._state.reopen_if_due():
            raise AuditError(str(self._state.problem))
        seq, now = self._last_seq + 1, int(self._clock() * 1000)
        digest = entry_hash(seq, now, user, peer, method, target, params, result, self._last_hash)
        entry = AuditEntry(
            seq, now, user, peer, method, target, params, result, self._last_hash, digest
        )
        try:
            self._db.execute(f"INSERT INTO audit ({FIELDS}) VALUES (?,?,?,?,?,?,?,?,?,?)",
                             (seq, now, user, peer, method, target, params, result,
                              self._last_hash, digest))  # fmt: skip
        except sqlite3.Error as exc:
            raise AuditError(self._state.failed(exc)) from exc
        self._state.succeeded()
        self._last_seq, self._last_hash = seq, digest
        self._save_anchor()
        self._log_head()
        return entry

    # -- denials, at a bounded rate ----------------------------------------------------

    def record_denial(self, user: str, peer: str, method: str, target: str, params: str,
                      result: str, reason: str) -> None:  # fmt: skip
        """A denied call: written in full if it is the first of its kind in the interval
        (and the interval's bound allows), else counted into a summary record.

        Args:
            user, peer, method, target, params, result: as for `append`; params and
                result are cut to MAX_DENIAL_TEXT (a denied caller chose them).
            reason: the kind of denial in the daemon's own words
                (`UNAUTHENTICATED: invalid JWT`), never the caller's text: the
                denials are grouped by it.

        Raises:
            AuditError: the record could not be written.
        """
        with self._lock:
            self._summarise_due()
            kind = DenialKind(peer_host(peer), user, method, reason)
            if not self._denials.admit(kind, int(self._clock() * 1000)):
                return
            entry = self._append(user, peer, method, target, params[:MAX_DENIAL_TEXT],
                                 result[:MAX_DENIAL_TEXT])  # fmt: skip
            self._denials.recorded(kind, entry.seq)

    def _summarise_due(self) -> None:
        for summary in self._denials.due(int(self._clock() * 1000)):
            self._summarise(summary)

    def _summarise(self, summary: Summary) -> None:
        try:
            self._append(summary.user, summary.peer, summary.method, "", summary.params,
                         summary.result[:1000])  # fmt: skip
        except AuditError as exc:
            log.error("%s (denial summary not recorded: %s)", exc, summary.result)

    def query(self, since_ms: int = 0, until_ms: int = 0, user: str = "", method: str = "",
              limit: int = 1000) -> list[AuditEntry]:  # fmt: skip
        sql = f"SELECT {FIELDS} FROM audit WHERE time_ms >= ?"
        args: list[object] = [since_ms]
        if until_ms:
            sql, args = sql + " AND time_ms <= ?", [*args, until_ms]
        if user:
            sql, args = sql + " AND user = ?", [*args, user]
        if method:
            sql, args = sql + " AND method LIKE ?", [*args, f"%{method}%"]
        with self._lock:
            self._summarise_due()  # a reader sees the repeats of finished intervals
            rows = self._db.execute(sql + " ORDER BY seq DESC LIMIT ?", (*args, limit)).fetchall()
        return [AuditEntry(*row) for row in rows]

    def _closing(self) -> None:
        for summary in self._denials.drain():
            self._summarise(summary)
        self._log_head(force=True)


def verify(path: Path, anchors: tuple[Head, ...] = ()) -> list[str]:
    """Problems in the chain, each naming the record; [] when intact.

    Args:
        path: an audit.sqlite3 file (read, never written).
        anchors: heads (seq, hash; hash "" if unknown) seen outside the file: the
            event journal's copy, a log line, a metrics scrape. A log that ends
            before one of them was cut short.

    Raises:
        NotAnAuditLog: the file is not SQLite, or has no audit table.
    """
    rows = _read_chain(path)
    problems: list[str] = []
    expected_seq, prev_hash = 1, GENESIS
    for entry in rows:
        problems += _check(entry, expected_seq, prev_hash)
        expected_seq, prev_hash = entry.seq + 1, entry.hash
    for anchor in anchors:
        problems += _check_anchor(rows, anchor)
    return problems


def _read_chain(path: Path) -> list[AuditEntry]:
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise NotAnAuditLog(f"{path} cannot be opened: {exc}") from exc
    try:
        return [AuditEntry(*r) for r in db.execute(f"SELECT {FIELDS} FROM audit ORDER BY rowid")]
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc) or "no such column" in str(exc):
            raise NotAnAuditLog(f"{path} has no audit table: is it an audit.sqlite3?") from exc
        raise NotAnAuditLog(f"{path} cannot be read: {exc}") from exc
    except sqlite3.DatabaseError as exc:
        raise NotAnAuditLog(f"{path} is not an SQLite audit log: {exc}") from exc
    finally:
        db.close()


def _check_anchor(rows: list[AuditEntry], anchor: Head) -> list[str]:
    seq, digest = anchor
    last = rows[-1].seq if rows else 0
    if seq > last:
        gone = f"{seq}" if seq == last + 1 else f"{last + 1}..{seq}"
        return [f"record {gone} deleted from the end (the log ends at record {last}, but it "
                f"had reached record {seq}{f', hash {digest}' if digest else ''})"]  # fmt: skip
    found = next((e for e in rows if e.seq == seq), None)
    if found is not None and digest and found.hash != digest:
        return [f"record {seq} is not the record once seen there (hash {found.hash}, "
                f"expected {digest}): the log was rewritten"]  # fmt: skip
    return []


def _check(entry: AuditEntry, expected_seq: int, prev_hash: str) -> list[str]:
    problems = []
    if entry.seq < expected_seq:
        problems.append(f"record {entry.seq} is out of order (expected {expected_seq} or later)")
    elif entry.seq > expected_seq:
        missing = (
            f"{expected_seq}"
            if entry.seq == expected_seq + 1
            else f"{expected_seq}..{entry.seq - 1}"
        )
        problems.append(f"record {missing} deleted (the chain jumps to {entry.seq})")
    if entry.prev_hash != prev_hash and entry.seq == expected_seq:
        problems.append(f"record {entry.seq} does not follow record {entry.seq - 1} (chain broken)")
    recomputed = entry_hash(entry.seq, entry.time_ms, entry.user, entry.peer, entry.method,
                            entry.target, entry.params, entry.result, entry.prev_hash)  # fmt: skip
    if recomputed != entry.hash:
        problems.append(f"record {entry.seq} was edited (its content does not match its hash)")
    return problems
