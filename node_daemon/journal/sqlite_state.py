"""StateDb: one SQLite state file (WAL) that a full disk degrades instead of stopping.

The daemon's state files (event journal, audit log, usage) are opened in WAL
mode, which writes at once: the header of a new file, the WAL index (-shm) of
an old one. On a full disk that fails, and a daemon that gave up there would
serve nothing at all. A StateDb opens what it can instead: the file read-only
(reads are served, changes refused with a "state disk full: ..." message),
or, when there is nothing on disk yet, an empty in-memory copy of the schema,
and it reopens the file for writing once there is room again.

Each file's layout is versioned (node_daemon.journal.schema_version): opening
one for writing first migrates an older one, and a newer one is refused
(StateFileTooNew) before anything is written to it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

from node_daemon.journal.schema_version import (
    FileSchema,
    StateFileTooNew,
    bring_up_to_date,
    refuse_newer,
    stamp,
)

log = logging.getLogger(__name__)

# Reopening costs a connect and a few statements; once a second is prompt enough.
REOPEN_EVERY_S = 1.0
# Below this much room a failed write is put down to a full disk.
NEARLY_FULL_BYTES = 1024 * 1024

Prepare = Callable[[sqlite3.Connection], None]


def free_bytes(directory: Path) -> int | None:
    """Bytes an unprivileged writer may still use on the file system of `directory`."""
    try:
        stats = os.statvfs(directory)
    except OSError:
        return None
    return stats.f_bavail * stats.f_frsize


def describe_failure(path: Path, what: str, exc: sqlite3.Error) -> str:
    """Why `path` cannot be written, for logs and for the callers whose change is refused."""
    free = free_bytes(path.parent)
    full = getattr(exc, "sqlite_errorname", "") == "SQLITE_FULL" or (
        free is not None and free < NEARLY_FULL_BYTES
    )
    if full:
        room = f"{free} bytes free" if free is not None else "no room"
        return f"state disk full: cannot write {what} {path} ({exc}; {room} on {path.parent})"
    return f"state file not writable: cannot write {what} {path} ({exc})"


def open_writable(path: Path, prepare: Prepare, layout: FileSchema) -> sqlite3.Connection:
    """A read-write connection, migrated to `layout` and prepared (pragmas, schema).

    Raises:
        StateFileTooNew: the file is newer than this daemon; nothing was written.
        sqlite3.Error: it cannot be opened, migrated or prepared.
    """
    refuse_newer(path, layout)  # before connect: a read-write open may write a WAL index
    db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    try:
        new = bring_up_to_date(db, path, layout)
        prepare(db)
        if new:
            stamp(db, layout)
    except (sqlite3.Error, StateFileTooNew):
        db.close()
        raise
    return db


def open_for_reading(path: Path, probe: str, schema: str) -> sqlite3.Connection:
    """What is on disk, read-only; an empty in-memory schema when there is nothing to read.

    `mode=ro` sees a WAL left by a crash, but needs the WAL index to exist already;
    `immutable=1` needs nothing written at all (after a clean stop the WAL is folded
    into the file, so it misses nothing then). `probe` must run for a file to count.
    """
    if path.exists() and path.stat().st_size > 0:
        for uri in (f"file:{path}?mode=ro", f"file:{path}?immutable=1"):
            db = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)
            try:
                db.execute(probe).fetchall()
                return db
            except sqlite3.Error:
                db.close()
    db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
    db.executescript(schema)
    return db


class StateDb:
    """A state file's connection: writable, or read-only until it can be reopened.

    Not thread-safe by itself: its owner calls it under the owner's lock.

    Args:
        path: the SQLite file.
        what: what it holds, for messages ("event journal").
        prepare: makes a new read-write connection ready (pragmas, schema, meta rows).
        schema: the tables, for an empty in-memory stand-in.
        probe: a query that runs on a file with the schema.
        layout: the file's schema version and migrations.
        clock: monotonic seconds, for pacing reopen attempts.

    Raises:
        StateFileTooNew: the file was written by a newer release (left untouched).
    """

    def __init__(self, path: Path, what: str, prepare: Prepare, schema: str, probe: str, *,
                 layout: FileSchema,
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        self.path, self.what, self.layout = path, what, layout
        self._prepare, self._schema, self._probe, self._clock = prepare, schema, probe, clock
        self.problem: str | None = None
        self.read_only = False
        self._next_reopen_s = 0.0
        try:
            self.db = open_writable(path, prepare, layout)
        except sqlite3.OperationalError as exc:  # full, read-only, I/O; not a corrupt file
            self.db = self._degrade(exc)

    def _degrade(self, exc: sqlite3.Error) -> sqlite3.Connection:
        self.problem, self.read_only = describe_failure(self.path, self.what, exc), True
        self._next_reopen_s = self._clock() + REOPEN_EVERY_S
        log.error("%s; serving what is on disk read-only and refusing changes until it can "
                  "be written (retried every %.0f s)", self.problem, REOPEN_EVERY_S)  # fmt: skip
        return open_for_reading(self.path, self._probe, self._schema)

    def reopen_if_due(self) -> bool:
        """Try to open the file for writing again (paced); True when it is writable now."""
        if not self.read_only:
            return True
        if self._clock() < self._next_reopen_s:
            return False
        self._next_reopen_s = self._clock() + REOPEN_EVERY_S
        try:
            writable = open_writable(self.path, self._prepare, self.layout)
        except (sqlite3.Error, StateFileTooNew):  # a newer file put in its place: not ours
            return False
        with contextlib.suppress(sqlite3.Error):
            self.db.close()
        self.db, self.read_only = writable, False
        self.succeeded()
        return True

    def failed(self, exc: sqlite3.Error) -> str:
        """A write failed: remember why (logged once per bad spell); the reason."""
        problem = describe_failure(self.path, self.what, exc)
        if self.problem is None:
            log.error("%s; changes are refused until it can be written", problem)
        self.problem = problem
        return problem

    def succeeded(self) -> None:
        """A write went through: the bad spell, if any, is over."""
        if self.problem is not None:
            log.warning("%s %s can be written again", self.what, self.path)
        self.problem = None

    def close(self) -> None:
        self.db.close()


class StateFile:
    """The owner of one StateDb (`_state`, opened by the subclass), thread-safe by its lock.

    Shared here: the file's directory made, `_lock`, the connection (`_db`), why the
    file cannot be written (`problem`), and closing it under the lock.
    """

    _state: StateDb

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()

    @property
    def _db(self) -> sqlite3.Connection:
        return self._state.db

    @property
    def problem(self) -> str | None:
        """Why changes cannot be written now ("state disk full: ..."), until a write
        succeeds; None when they can."""
        with self._lock:
            return self._problem_text()

    def _problem_text(self) -> str | None:
        return self._state.problem

    def close(self) -> None:
        with self._lock:
            self._closing()
            self._state.close()

    def _closing(self) -> None:
        """What is left to write, under the lock, before the file closes."""
