"""AuditLog: who did what, from where, with what result — in SQLite, hash-chained.

Each record carries the hash of the one before it, so an edited, deleted or
reordered record breaks the chain and `gpufleet audit verify` names it. (A
chain cannot show that its newest records were cut off; ship the log to an
append-only store as well if that matters; see docs/security.md.)
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

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


class AuditError(Exception):
    """The audit log cannot be written: destructive calls are refused until it can."""


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


class AuditLog:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(SCHEMA)
            row = self._db.execute(
                "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1"
            ).fetchone()
        self._last_seq: int = int(row[0]) if row else 0
        self._last_hash: str = str(row[1]) if row else GENESIS

    def append(
        self, user: str, peer: str, method: str, target: str, params: str, result: str
    ) -> AuditEntry:
        with self._lock:
            seq, now = self._last_seq + 1, int(time.time() * 1000)
            digest = entry_hash(
                seq, now, user, peer, method, target, params, result, self._last_hash
            )
            entry = AuditEntry(
                seq, now, user, peer, method, target, params, result, self._last_hash, digest
            )
            try:
                self._db.execute(f"INSERT INTO audit ({FIELDS}) VALUES (?,?,?,?,?,?,?,?,?,?)",
                                 (seq, now, user, peer, method, target, params, result,
                                  self._last_hash, digest))  # fmt: skip
            except sqlite3.Error as exc:
                raise AuditError(f"cannot write the audit log {self.path}: {exc}") from exc
            self._last_seq, self._last_hash = seq, digest
            return entry

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
            rows = self._db.execute(sql + " ORDER BY seq DESC LIMIT ?", (*args, limit)).fetchall()
        return [AuditEntry(*row) for row in rows]

    def close(self) -> None:
        with self._lock:
            self._db.close()


def verify(path: Path) -> list[str]:
    """Problems in the chain, each naming the record; [] when intact."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = [AuditEntry(*r) for r in db.execute(f"SELECT {FIELDS} FROM audit ORDER BY rowid")]
    finally:
        db.close()
    problems: list[str] = []
    expected_seq, prev_hash = 1, GENESIS
    for entry in rows:
        problems += _check(entry, expected_seq, prev_hash)
        expected_seq, prev_hash = entry.seq + 1, entry.hash
    return problems


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
