"""Schema versions of the state files, and the migrations that bring an older file up.

Every state file (event journal, audit log, metric history, usage) carries the
version of its layout in SQLite's header (`PRAGMA user_version`). A file from
before versioning reads 0: it was written by the release before versions (0.1.0
as first shipped), whose layout is version 1's, so its migration only stamps it.

Opening a file whose version is
- this daemon's: nothing to do;
- older: the file is first copied to `FILE.pre-vN` (SQLite's backup API, so a
  roll-back to the previous release has the file as that release left it), then
  the migrations from its version up to N run in one transaction, which also
  stamps N: a migration that fails leaves the file as it was;
- newer: StateFileTooNew, before anything is written (no WAL, no pragma, no
  backup): an older daemon must not "repair" a layout it does not know.

A file with no tables yet is new: it is created at this daemon's version.
Each store keeps its FileSchema (the version and the migrations) next to its
tables; this module is the one mechanism that applies them.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from node_daemon import __version__

log = logging.getLogger(__name__)

Migration = Callable[[sqlite3.Connection], None]


def stamp_only(db: sqlite3.Connection) -> None:
    """A migration for a layout that did not change: the version stamp is all it adds."""


@dataclass(frozen=True)
class FileSchema:
    """A state file's layout version, and how to bring each older version up.

    Attributes:
        what: what the file holds, for messages ("event journal").
        migrations: migrations[v] brings version v to v + 1, in order; the file's
            current version is their count. Never edit a released one: add one.
    """

    what: str
    migrations: Sequence[Migration]

    @property
    def version(self) -> int:
        return len(self.migrations)


class StateFileTooNew(Exception):
    """A state file was written by a newer release than this daemon: it is left untouched."""


def backup_path(path: Path, version: int) -> Path:
    """Where the copy of `path` from before its migration to `version` is kept."""
    return path.with_name(f"{path.name}.pre-v{version}")


def stored_version(path: Path) -> int | None:
    """The user_version in `path`'s header, read without writing; None for no file yet."""
    if not path.exists() or path.stat().st_size == 0:
        return None
    # The version lives in the header page. After a clean stop the WAL is folded in
    # and gone: immutable=1 reads the file and creates nothing (mode=ro would leave
    # a -wal and -shm behind). A WAL still there may hold a newer header: read it.
    wal = path.with_name(path.name + "-wal")
    mode = "mode=ro" if wal.exists() else "immutable=1"
    try:
        db = sqlite3.connect(f"file:{path}?{mode}", uri=True)
    except sqlite3.Error:
        return None  # unreadable here: opening it for writing says why
    try:
        return int(db.execute("PRAGMA user_version").fetchone()[0])
    except sqlite3.Error:
        return None
    finally:
        db.close()


def refuse_newer(path: Path, schema: FileSchema) -> None:
    """StateFileTooNew when `path` holds a layout newer than this daemon knows."""
    found = stored_version(path)
    if found is not None and found > schema.version:
        raise StateFileTooNew(
            f"{path}: {schema.what} schema version {found} was written by a newer gpufleet; "
            f"this daemon ({__version__}) knows versions up to {schema.version}. The file "
            "is left untouched: run the newer release again, or restore the copy the newer "
            f"release kept of it before its migration ({backup_path(path, found)} or an "
            "older .pre-v file)"
        )


def refuse_newer_files(files: Sequence[tuple[Path, FileSchema]]) -> None:
    """refuse_newer for every file first, so none is migrated when one is too new."""
    for path, schema in files:
        refuse_newer(path, schema)


def bring_up_to_date(db: sqlite3.Connection, path: Path, schema: FileSchema) -> bool:
    """Migrate `db` (a read-write connection to `path`) to schema.version.

    Call it after the pragmas and before the current tables are created, so that
    a migration sees the file as the older release left it.

    Returns:
        True when the file is new (no tables yet): the caller creates the tables,
        then `stamp` sets the version.

    Raises:
        StateFileTooNew: the file is newer than this daemon (nothing written).
        sqlite3.Error: the backup or a migration failed (the file is as it was).
    """
    found = int(db.execute("PRAGMA user_version").fetchone()[0])
    if found > schema.version:
        refuse_newer(path, schema)
    if found == schema.version:
        return False
    if not db.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone():
        return True
    _backup(db, backup_path(path, schema.version))
    db.execute("BEGIN IMMEDIATE")
    try:
        for version in range(found, schema.version):
            schema.migrations[version](db)
        # user_version is written in the header inside the transaction: it rolls back too.
        db.execute(f"PRAGMA user_version = {schema.version}")
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    kept = backup_path(path, schema.version)
    log.warning("%s %s migrated from schema version %d to %d (the file before: %s)",
                schema.what, path, found, schema.version, kept)  # fmt: skip
    return False


def stamp(db: sqlite3.Connection, schema: FileSchema) -> None:
    """Mark a newly created file with this daemon's version."""
    db.execute(f"PRAGMA user_version = {schema.version}")


def _backup(db: sqlite3.Connection, target: Path) -> None:
    """Copy the whole database (WAL included) to `target`, atomically, synced to disk."""
    partial = target.with_name(target.name + ".partial")
    partial.unlink(missing_ok=True)
    try:
        copy = sqlite3.connect(partial)
        try:
            db.backup(copy)
        finally:
            copy.close()
        with open(partial, "rb") as written:
            os.fsync(written.fileno())
    except (sqlite3.Error, OSError) as exc:
        partial.unlink(missing_ok=True)  # a full disk must not keep half a copy
        if isinstance(exc, sqlite3.Error):
            raise
        raise sqlite3.OperationalError(f"cannot back up to {target}: {exc}") from exc
    os.replace(partial, target)
