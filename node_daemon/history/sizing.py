"""Keeping the history file bounded: each tier to its retention, the whole to max_bytes."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Sequence

from node_daemon.history.tiers import Tier

log = logging.getLogger(__name__)

# Over max_bytes, the file is trimmed to this share of it, so trimming (a scan of
# every row's size) runs once in a while, not after every flush.
TRIM_TO = 0.9
# The share of the biggest tier's oldest points one trimming round deletes.
TRIM_SHARE = 0.1


def prune(db: sqlite3.Connection, tiers: Sequence[Tier], newest_ms: int) -> None:
    """Delete each tier's points older than its retention, counted back from the newest tick."""
    for tier in tiers:
        db.execute(
            "DELETE FROM points WHERE tier = ? AND ts_ms < ?",
            (tier.id, newest_ms - tier.retention_s * 1000),
        )


def used_bytes(db: sqlite3.Connection) -> int:
    """Bytes of the file's pages in use (free pages excluded)."""
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    free = db.execute("PRAGMA freelist_count").fetchone()[0]
    size = db.execute("PRAGMA page_size").fetchone()[0]
    return int((pages - free) * size)


def enforce_max_bytes(db: sqlite3.Connection, max_bytes: int) -> None:
    """Over max_bytes, the tier that takes the most room gives up its oldest points first
    (the 1 min tier, with default settings) until the file is within TRIM_TO of it; the
    pages freed go back to the file system."""
    if used_bytes(db) <= max_bytes:
        return
    while used_bytes(db) > max_bytes * TRIM_TO:
        sizes = db.execute(
            "SELECT tier, COUNT(*), SUM(length(mean) + IFNULL(length(max), 0)) FROM points "
            "GROUP BY tier ORDER BY 3 DESC LIMIT 1"
        ).fetchone()
        if sizes is None:
            break
        tier, rows, _ = sizes
        cut = max(1, int(rows * TRIM_SHARE))
        db.execute(
            "DELETE FROM points WHERE tier = ?1 AND ts_ms <= (SELECT ts_ms FROM points "
            "WHERE tier = ?1 ORDER BY ts_ms LIMIT 1 OFFSET ?2)",
            (tier, cut - 1),
        )
        db.execute("PRAGMA incremental_vacuum").fetchall()  # each step frees one page
    log.info("metric history trimmed to its max_bytes %d (%d bytes in use)", max_bytes,
             used_bytes(db))  # fmt: skip
