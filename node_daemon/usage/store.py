"""UsageStore: usage sums per (day, user) and per day for the node, in SQLite (WAL).

The file is the daemon's own `usage.sqlite3` in its state directory, apart from
the event journal: accounting writes every few seconds and must never slow the
journal's fsync-per-event path. Amounts only ever grow by UPSERT (`x = x + new`),
so a restarted daemon simply keeps adding, and an import can run while the
daemon writes (SQLite serialises the two writers; `busy_timeout` waits).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from node_daemon.journal.schema_version import FileSchema, stamp_only
from node_daemon.journal.sqlite_state import StateDb, StateFile
from node_daemon.usage.accounted import (
    SELECT_JOBS,
    UPSERT_JOB,
    AccountedJob,
    job_values,
)
from node_daemon.usage.amounts import NODE_COLUMNS, USAGE_COLUMNS, NodeAmounts, UsageAmounts

log = logging.getLogger(__name__)

USAGE_FILE = "usage.sqlite3"
SCHEMA_VERSION = "1"
BUSY_TIMEOUT_MS = 5000

_USAGE_DEFS = ", ".join(f"{c} REAL NOT NULL DEFAULT 0" for c in USAGE_COLUMNS)
_NODE_DEFS = ", ".join(f"{c} REAL NOT NULL DEFAULT 0" for c in NODE_COLUMNS)
SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS user_usage (
    day TEXT NOT NULL, user TEXT NOT NULL, {_USAGE_DEFS}, PRIMARY KEY (day, user)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS node_usage (day TEXT PRIMARY KEY, {_NODE_DEFS}) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS imports (
    sha256 TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    source TEXT NOT NULL,
    imported_unix_ms INTEGER NOT NULL,
    rows INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS slurm_jobs (
    cluster TEXT NOT NULL, job_id TEXT NOT NULL, step TEXT NOT NULL,
    user TEXT NOT NULL, account TEXT NOT NULL,
    start_unix REAL NOT NULL, end_unix REAL, seen_unix REAL NOT NULL,
    gpus REAL NOT NULL, gpu_type TEXT NOT NULL, state TEXT NOT NULL, source TEXT NOT NULL,
    PRIMARY KEY (cluster, job_id, step)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS slurm_jobs_start ON slurm_jobs (start_unix);
"""


def _upsert(table: str, keys: tuple[str, ...], columns: tuple[str, ...]) -> str:
    names = ", ".join((*keys, *columns))
    marks = ", ".join("?" * (len(keys) + len(columns)))
    sums = ", ".join(f"{c} = {c} + excluded.{c}" for c in columns)
    conflict = ", ".join(keys)
    return (
        f"INSERT INTO {table} ({names}) VALUES ({marks}) "
        f"ON CONFLICT ({conflict}) DO UPDATE SET {sums}"
    )


PROBE = "SELECT 1 FROM meta, user_usage, node_usage, imports LIMIT 0"
# Version 1: the layout of 0.1.0, the release before versions.
FILE_SCHEMA = FileSchema("usage store", (stamp_only,))


def _prepare(db: sqlite3.Connection) -> None:
    db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    db.execute("PRAGMA journal_mode=WAL")
    # NORMAL: a committed flush survives a daemon crash; only an OS crash or
    # power loss can take back the last few flushes (seconds of usage).
    db.execute("PRAGMA synchronous=NORMAL")
    db.executescript(SCHEMA)
    db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (SCHEMA_VERSION,))


_UPSERT_USER = _upsert("user_usage", ("day", "user"), USAGE_COLUMNS)
_UPSERT_NODE = _upsert("node_usage", ("day",), NODE_COLUMNS)
_IN_RANGE = "WHERE (?1 IS NULL OR day >= ?1) AND (?2 IS NULL OR day <= ?2)"
_SELECT_USER = f"SELECT day, user, {', '.join(USAGE_COLUMNS)} FROM user_usage {_IN_RANGE}"
_SELECT_NODE = f"SELECT day, {', '.join(NODE_COLUMNS)} FROM node_usage {_IN_RANGE}"

_FIND_JOB = "SELECT 1 FROM slurm_jobs WHERE cluster = ? AND job_id = ? AND step = ?"
UserUsage = Mapping[tuple[str, str], UsageAmounts]
NodeUsage = Mapping[str, NodeAmounts]


class UsageStoreError(Exception):
    """The usage file could not be read or written (disk full, read-only, corrupt)."""


class AlreadyImported(Exception):
    """This exact file was imported before; importing it again would count it twice."""


@dataclass(frozen=True)
class ImportRecord:
    """One imported history file, known by the SHA-256 of its content."""

    sha256: str
    kind: str
    source: str
    imported_unix_ms: int
    rows: int


class UsageStore(StateFile):
    """Thread-safe: one connection behind a lock. `problem`: why usage cannot be saved
    now."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        try:
            # A full disk opens it read-only (reads served, adds refused) until there is
            # room; only a file that is no SQLite at all stops the daemon here.
            self._state = StateDb(path, "usage store", _prepare, SCHEMA, PROBE, layout=FILE_SCHEMA)
        except sqlite3.Error as exc:
            raise UsageStoreError(f"cannot open the usage store {path}: {exc}") from exc

    def add(self, users: UserUsage, node: NodeUsage) -> None:
        """Add amounts to the sums, all in one transaction."""
        with self._lock:
            self._transaction(lambda: self._add(users, node))

    def _add(self, users: UserUsage, node: NodeUsage) -> None:
        self._db.executemany(
            _UPSERT_USER, [(day, user, *a.values()) for (day, user), a in users.items()]
        )
        self._db.executemany(_UPSERT_NODE, [(day, *a.values()) for day, a in node.items()])

    def add_import(self, record: ImportRecord, users: UserUsage) -> None:
        """Add imported history and remember the file; AlreadyImported if it was before."""
        with self._lock:
            self._transaction(lambda: self._add_import(record, users))

    def _add_import(self, record: ImportRecord, users: UserUsage) -> None:
        previous = self._find_import(record.sha256)
        if previous is not None:
            raise AlreadyImported(_already_imported_message(previous))
        self._db.execute(
            "INSERT INTO imports VALUES (?, ?, ?, ?, ?)",
            (record.sha256, record.kind, record.source, record.imported_unix_ms, record.rows),
        )
        self._add(users, {})

    def _transaction(self, work: Callable[[], None]) -> None:
        if not self._state.reopen_if_due():
            raise UsageStoreError(str(self._state.problem))
        try:
            self._db.execute("BEGIN IMMEDIATE")
            work()
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            self._rollback()
            raise UsageStoreError(self._state.failed(exc)) from exc
        except BaseException:
            self._rollback()
            raise
        self._state.succeeded()

    def _rollback(self) -> None:
        with contextlib.suppress(sqlite3.Error):  # no transaction was open
            self._db.execute("ROLLBACK")

    def user_usage(
        self, first_day: str | None, last_day: str | None
    ) -> list[tuple[str, str, UsageAmounts]]:
        """(day, user, amounts) for the days in [first_day, last_day]; None: unbounded."""
        rows = self._select(_SELECT_USER, first_day, last_day)
        return [(day, user, UsageAmounts(*values)) for day, user, *values in rows]

    def node_usage(
        self, first_day: str | None, last_day: str | None
    ) -> list[tuple[str, NodeAmounts]]:
        """(day, node totals) for the days in [first_day, last_day]; None: unbounded."""
        rows = self._select(_SELECT_NODE, first_day, last_day)
        return [(day, NodeAmounts(*values)) for day, *values in rows]

    def _select(self, query: str, first: str | None, last: str | None) -> list[Any]:
        with self._lock:
            try:
                return self._db.execute(query + " ORDER BY day", (first, last)).fetchall()
            except sqlite3.Error as exc:
                raise UsageStoreError(f"cannot read the usage store {self.path}: {exc}") from exc

    def put_jobs(self, jobs: Sequence[AccountedJob]) -> tuple[int, int]:
        """Store Slurm jobs by (cluster, job id, step), one transaction: a job seen before
        is replaced, never added twice. Returns (new, updated)."""
        counts = [0, 0]

        def work() -> None:
            for job in jobs:
                key = (job.cluster, job.job_id, job.step)
                known = self._db.execute(_FIND_JOB, key).fetchone() is not None
                counts[known] += 1
                self._db.execute(UPSERT_JOB, job_values(job))

        with self._lock:
            self._transaction(work)
        return counts[0], counts[1]

    def jobs(self, from_unix: float | None, to_unix: float) -> list[AccountedJob]:
        """Jobs whose allocation overlaps [from_unix, to_unix); None: from the start."""
        with self._lock:
            try:
                rows = self._db.execute(SELECT_JOBS, (from_unix, to_unix)).fetchall()
            except sqlite3.Error as exc:
                raise UsageStoreError(f"cannot read the usage store {self.path}: {exc}") from exc
        return [AccountedJob(*row) for row in rows]

    def meta(self, key: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return str(row[0]) if row else None

    def set_meta(self, key: str, value: str) -> None:
        def work() -> None:
            self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

        with self._lock:
            self._transaction(work)

    def find_import(self, sha256: str) -> ImportRecord | None:
        with self._lock:
            return self._find_import(sha256)

    def _find_import(self, sha256: str) -> ImportRecord | None:
        row = self._db.execute("SELECT * FROM imports WHERE sha256 = ?", (sha256,)).fetchone()
        return ImportRecord(*row) if row else None


def _already_imported_message(previous: ImportRecord) -> str:
    when = dt.datetime.fromtimestamp(previous.imported_unix_ms / 1000, dt.UTC)
    return (
        f"this file was already imported on {when:%Y-%m-%d %H:%M} UTC "
        f"(from {previous.source}, {previous.rows} rows, sha256 {previous.sha256[:12]}…); "
        "importing it again would count its usage twice"
    )
