"""HistoryStore: every sampling tick on disk (SQLite, WAL), downsampled into coarser tiers.

The file is the daemon's own `history.sqlite3` in its state directory, apart from
the journal: it writes a row per tick and must never slow the journal's fsync per
event. The sampler thread only hands over each sweep (`append`, a list append);
the writer thread ('gpufleet-history') encodes, downsamples and commits every
`flush_interval_s`, prunes each tier to its retention and keeps the file within
`max_bytes`. Times come from the sweeps themselves, never the wall clock, so a
day can be written in seconds (bench/history_disk.py, the tests); retention counts
back from them only as far as they agree with time passing (history.retention), so
a clock step prunes nothing it should not.

A damaged file never keeps the daemon from starting: one that is no database is set
aside and a new one begun (`set_aside` says so, for the journal); a row that does not
decode is skipped, logged once and counted (`corrupt_rows`), the rest served.

A full or read-only disk degrades it (node_daemon.journal.sqlite_state): what is
stored is still served, rows wait in memory (a bounded number) and are written
once the file can be written again.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpufleet.v1.gpu_metrics import GPU_METRICS
from node_daemon.backends.readings import GpuReading
from node_daemon.history.codec import CorruptBlob, decode, encode
from node_daemon.history.retention import RetentionClock, boot_seconds
from node_daemon.history.settings import HistorySettings
from node_daemon.history.sizing import enforce_max_bytes, prune
from node_daemon.history.tiers import NAN, Downsampler, Layout, Point, Tier, tiers_of
from node_daemon.journal.schema_version import FileSchema, stamp_only
from node_daemon.journal.sqlite_state import StateDb, StateFile

log = logging.getLogger(__name__)

HISTORY_FILE = "history.sqlite3"
SCHEMA_VERSION = "1"
BUSY_TIMEOUT_MS = 5000
# Rows kept in memory while the file cannot be written; beyond, the oldest go.
MAX_UNWRITTEN_ROWS = 4000
# Corrupt rows remembered (each logged once); beyond, they are still skipped and counted.
MAX_REMEMBERED_CORRUPT_ROWS = 10_000
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS layouts (
    id INTEGER PRIMARY KEY, gpus TEXT NOT NULL, metrics TEXT NOT NULL, UNIQUE (gpus, metrics)
);
CREATE TABLE IF NOT EXISTS points (
    tier INTEGER NOT NULL, ts_ms INTEGER NOT NULL, layout INTEGER NOT NULL,
    mean BLOB NOT NULL, max BLOB, PRIMARY KEY (tier, ts_ms)
) WITHOUT ROWID;
"""
PROBE = "SELECT 1 FROM meta, layouts, points LIMIT 0"
# Version 1: the layout of 0.1.0, the release before versions (its meta
# schema_version "1" names the point encoding, and stays).
FILE_SCHEMA = FileSchema("metric history", (stamp_only,))
_INSERT = "INSERT OR REPLACE INTO points VALUES (?, ?, ?, ?, ?)"


def _prepare(db: sqlite3.Connection) -> None:
    db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    # Before the first table: lets pruning hand pages back (incremental_vacuum), so the
    # file itself, not only its content, stays within max_bytes.
    db.execute("PRAGMA auto_vacuum=INCREMENTAL")
    db.execute("PRAGMA journal_mode=WAL")
    # NORMAL: a committed flush survives a daemon crash; an OS crash may take back the
    # last few seconds of history, which is all a flush holds.
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA journal_size_limit=4194304")
    db.executescript(SCHEMA)
    db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (SCHEMA_VERSION,))


class HistoryStoreError(Exception):
    """The history file could not be read."""


class HistoryDataLoss(Exception):
    """Every stored row a query needed is damaged beyond decoding (DATA_LOSS)."""


@dataclass(frozen=True)
class StoredPoint:
    """A point as read back: values by (GPU, metric) through its layout."""

    timestamp_ms: int
    layout: Layout
    means: Sequence[float]
    maxes: Sequence[float]


@dataclass(frozen=True)
class TierRead:
    """A tier's points in a range, and the rows there that did not decode (skipped)."""

    points: list[StoredPoint]
    corrupt: int
    reason: str | None  # the first corrupt row's, where there is one


@dataclass(frozen=True)
class _Row:
    tier: int
    timestamp_ms: int
    layout: Layout
    mean: bytes
    max: bytes | None


class HistoryStore(StateFile):
    """Thread-safe. `append` from the sampler thread; `flush` from the writer (or a test).

    Args:
        path: the SQLite file.
        settings: the [history] table.
        raw_step_ms: the sampling interval (the raw tier's step).
        boot_clock: seconds of a clock no one can set, read at each `append`, against
            which the sweeps' stamps are checked for clock steps (a test's own clock).
    """

    def __init__(self, path: Path, settings: HistorySettings, raw_step_ms: int,
                 boot_clock: Callable[[], float] = boot_seconds) -> None:  # fmt: skip
        super().__init__(path)  # _lock: the connection, the downsampler, the unwritten rows
        self.settings = settings
        raw, ten, minute = tiers_of(settings)
        self.tiers: tuple[Tier, ...] = (Tier(raw.id, raw.name, raw_step_ms, raw.retention_s),
                                        ten, minute)  # fmt: skip
        self._metrics = tuple(m.field for m in GPU_METRICS)
        self._boot_clock = boot_clock
        self._pending: list[tuple[int, int, Sequence[GpuReading]]] = []
        self._pending_lock = threading.Lock()
        self._unwritten: list[_Row] = []
        self._layout_ids: dict[Layout, int] = {}
        self._layouts: dict[int, Layout] = {}
        self._retention = RetentionClock()
        self._corrupt: dict[tuple[int, int], str] = {}  # (tier, ts_ms) → why
        self._corrupt_beyond = 0
        # Why the file found at start was set aside, for the journal; None: it was not.
        self.set_aside: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        try:
            self._state, self._downsampler = self._open()
        except sqlite3.DatabaseError as exc:
            # Not SQLite (or damaged): history is worth less than a daemon that starts, so
            # the file is kept aside for a post-mortem and a new one begun.
            aside = _set_aside(path)
            self.set_aside = (f"metric history {path} could not be read ({exc}); kept as "
                              f"{aside.name}, a new one begun")  # fmt: skip
            log.warning("%s", self.set_aside)
            self._layouts.clear()
            self._unwritten.clear()
            try:
                self._state, self._downsampler = self._open()
            except sqlite3.Error as again:
                raise HistoryStoreError(f"cannot open the metric history {path}: {again}") from exc

    def _open(self) -> tuple[StateDb, Downsampler]:
        self._state = StateDb(self.path, "metric history", _prepare, SCHEMA, PROBE,
                              layout=FILE_SCHEMA)  # fmt: skip
        return self._state, self._resume()

    @property
    def writable(self) -> bool:
        """False while the file cannot be written (full or read-only disk)."""
        with self._lock:
            return not self._state.read_only and self._state.problem is None

    # ---- the tick path --------------------------------------------------------------

    def append(self, timestamp_ms: int, readings: Sequence[GpuReading]) -> None:
        """One sweep, stamped with its own time; costs a list append (readings are immutable)."""
        if readings:
            boot_ms = int(self._boot_clock() * 1000)  # now: the stamp's own moment
            with self._pending_lock:
                self._pending.append((timestamp_ms, boot_ms, readings))

    # ---- the writer -------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="gpufleet-history", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.settings.flush_interval_s):
            try:
                self.flush()
            except Exception:  # a bug in one flush must not end history for good
                log.exception("writing the metric history failed")

    def flush(self) -> None:
        """Downsample what was appended and commit it, with pruning and the size bound."""
        with self._pending_lock:
            ticks, self._pending = self._pending, []
        with self._lock:
            for timestamp_ms, boot_ms, readings in ticks:
                self._retention.observe(timestamp_ms, boot_ms)
                self._unwritten.extend(self._rows_of(timestamp_ms, readings))
            del self._unwritten[:-MAX_UNWRITTEN_ROWS]
            if self._unwritten and self._state.reopen_if_due():
                self._write()

    def _rows_of(self, timestamp_ms: int, readings: Sequence[GpuReading]) -> list[_Row]:
        layout = Layout(tuple(r.index for r in readings), self._metrics)
        # Inline, not a helper per value: this is most of the writer's time per tick.
        values = [NAN if (v := r[m]) is None else v for r in readings for m in GPU_METRICS]
        return [_row(tier, point) for tier, point in self._downsampler.add(
            Point.tick(timestamp_ms, layout, values))]  # fmt: skip

    def _write(self) -> None:
        rows, added = self._unwritten, {}
        try:
            self._db.execute("BEGIN IMMEDIATE")
            for layout in {r.layout for r in rows} - set(self._layout_ids):
                added[layout] = self._insert_layout(layout)
            ids = {**self._layout_ids, **added}
            self._db.executemany(_INSERT, [(r.tier, r.timestamp_ms, ids[r.layout], r.mean, r.max)
                                           for r in rows])  # fmt: skip
            if self._retention.now_ms is not None:  # no sweep yet: nothing says what is old
                prune(self._db, self.tiers, self._retention.now_ms)
            self._db.execute("COMMIT")
            enforce_max_bytes(self._db, self.settings.max_bytes)
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("ROLLBACK")
            self._state.failed(exc)  # logged once per bad spell; the rows wait in memory
            return
        self._state.succeeded()
        self._unwritten = []
        self._layout_ids.update(added)
        self._layouts.update({i: layout for layout, i in added.items()})

    def _insert_layout(self, layout: Layout) -> int:
        gpus, metrics = ",".join(map(str, layout.gpus)), ",".join(layout.metrics)
        self._db.execute("INSERT OR IGNORE INTO layouts (gpus, metrics) VALUES (?, ?)",
                         (gpus, metrics))  # fmt: skip
        row = self._db.execute(
            "SELECT id FROM layouts WHERE gpus = ? AND metrics = ?", (gpus, metrics)
        ).fetchone()
        return int(row[0])

    # ---- reading ----------------------------------------------------------------------

    def oldest_ms(self) -> dict[str, int | None]:
        """Each tier's oldest stored point (Unix ms), None while it is empty."""
        with self._lock:
            return {t.name: self._one("SELECT MIN(ts_ms) FROM points WHERE tier = ?", t.id)
                    for t in self.tiers}  # fmt: skip

    def read(self, tier: Tier, start_ms: int, end_ms: int) -> list[StoredPoint]:
        """The tier's points stamped within [start_ms, end_ms], oldest first (rows that do
        not decode skipped)."""
        return self.read_points(tier, start_ms, end_ms).points

    def read_points(self, tier: Tier, start_ms: int, end_ms: int) -> TierRead:
        """The tier's points stamped within [start_ms, end_ms], oldest first, and how many
        rows there did not decode (each skipped, logged once, counted in corrupt_rows)."""
        self.flush()  # an answer includes the seconds not yet committed
        query = ("SELECT ts_ms, layout, mean, max FROM points "
                 "WHERE tier = ? AND ts_ms BETWEEN ? AND ? ORDER BY ts_ms")  # fmt: skip
        points: list[StoredPoint] = []
        corrupt, reason = 0, None
        with self._lock:
            try:
                rows = self._db.execute(query, (tier.id, start_ms, end_ms)).fetchall()
                for row in rows:
                    try:
                        points.append(self._point(*row))
                    except CorruptBlob as exc:
                        corrupt += 1
                        why = self._skipped(tier.id, row[0], exc)
                        reason = reason or why
            except sqlite3.Error as exc:
                raise HistoryStoreError(
                    f"cannot read the metric history {self.path}: {exc}"
                ) from exc
        return TierRead(points, corrupt, reason)

    @property
    def corrupt_rows(self) -> int:
        """Rows found undecodable (and skipped) since the store was opened, each once."""
        with self._lock:
            return len(self._corrupt) + self._corrupt_beyond

    def _skipped(self, tier: int, timestamp_ms: int, exc: CorruptBlob) -> str:
        """Count and log a row that does not decode, once per row; why, for an answer."""
        why = f"the {self.tiers[tier].name} row at {timestamp_ms} ms does not decode: {exc}"
        key = (tier, timestamp_ms)
        if key not in self._corrupt:
            if len(self._corrupt) < MAX_REMEMBERED_CORRUPT_ROWS:
                self._corrupt[key] = why
            else:
                self._corrupt_beyond += 1
            log.warning("metric history %s: %s; skipped", self.path, why)
        return why

    def _point(self, timestamp_ms: int, layout_id: int, mean: object, peak: object) -> StoredPoint:
        layout = self._layout(layout_id)
        size = len(layout.gpus) * len(layout.metrics)
        means = decode(mean, size)
        return StoredPoint(timestamp_ms, layout, means,
                           means if peak is None else decode(peak, size))  # fmt: skip

    def _layout(self, layout_id: int) -> Layout:
        """The layout of that id; CorruptBlob where the row is missing or damaged."""
        if layout_id not in self._layouts:
            row = self._db.execute(
                "SELECT gpus, metrics FROM layouts WHERE id = ?", (layout_id,)
            ).fetchone()
            try:
                gpus, metrics = row
                self._layouts[layout_id] = Layout(
                    tuple(int(g) for g in gpus.split(",") if g), tuple(metrics.split(","))
                )
            except (TypeError, ValueError, AttributeError) as exc:
                raise CorruptBlob(
                    f"its layout {layout_id!r} is missing or damaged ({exc})"
                ) from exc
        return self._layouts[layout_id]

    def gpus(self) -> set[int]:
        """Every GPU index the history has points of (a damaged layout row left out)."""
        with self._lock:
            rows = self._db.execute("SELECT gpus FROM layouts").fetchall()
        return {int(g) for (gpus,) in rows if isinstance(gpus, str)
                for g in gpus.split(",") if g.strip().isdigit()}  # fmt: skip

    def bytes_on_disk(self) -> int:
        """The file and its write-ahead log, as they are now."""
        wal = self.path.with_name(self.path.name + "-wal")
        return sum(p.stat().st_size for p in (self.path, wal) if p.exists())

    def _one(self, query: str, *args: object) -> int | None:
        row = self._db.execute(query, args).fetchone()
        return None if row is None or row[0] is None else int(row[0])

    # ---- start and stop ---------------------------------------------------------------

    def _resume(self) -> Downsampler:
        """A downsampler that carries on where the last run stopped: the raw ticks after
        each tier's last step are folded again, so a step cut by a restart is whole."""
        downsampler = Downsampler(tiers_of(self.settings))
        last = {t.id: self._one("SELECT MAX(ts_ms) FROM points WHERE tier = ?", t.id)
                for t in self.tiers}  # fmt: skip
        if last[0] is None:
            return downsampler
        since = min((last[t.id] or 0) + t.step_ms for t in self.tiers[1:])
        rows = self._db.execute(
            "SELECT ts_ms, layout, mean FROM points WHERE tier = 0 AND ts_ms >= ? ORDER BY ts_ms",
            (since,),
        ).fetchall()
        for timestamp_ms, layout_id, mean in rows:
            try:
                tick = self._point(timestamp_ms, layout_id, mean, None)
            except CorruptBlob as exc:  # a damaged row never stops the start
                self._skipped(0, timestamp_ms, exc)
                continue
            values = [float(v) for v in tick.means]
            for tier, point in downsampler.add(Point.tick(timestamp_ms, tick.layout, values)):
                stored = last[tier.id]
                if tier.id and (stored is None or point.timestamp_ms > stored):
                    self._unwritten.append(_row(tier, point))
        return downsampler

    def close(self) -> None:
        """Stop the writer, write what is left, close the file."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        self.flush()
        super().close()


def _set_aside(path: Path) -> Path:
    """Rename the file (and its WAL and index) to NAME.broken-UNIXTIME; the new name."""
    aside = path.with_name(f"{path.name}.broken-{int(time.time())}")
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            path.with_name(path.name + suffix).rename(aside.with_name(aside.name + suffix))
    return aside


def _row(tier: Tier, point: Point) -> _Row:
    # A raw point's max is its value: stored once.
    return _Row(tier.id, point.timestamp_ms, point.layout, encode(point.means),
                None if tier.id == 0 else encode(point.maxes))  # fmt: skip
