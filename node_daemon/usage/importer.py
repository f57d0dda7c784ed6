"""Importing usage history from before gpufleet: our own CSV export, or Slurm's sacct.

Each file is imported whole or not at all, in one transaction. Our CSV is
remembered by the SHA-256 of its content: the same file a second time is
refused. sacct output is stored per job (cluster, job id, step), so the same job
in two overlapping exports, or a file imported twice, is still counted once.
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import io
import math
import time
from dataclasses import dataclass
from pathlib import Path

from node_daemon.usage.accounted import from_sacct
from node_daemon.usage.amounts import USAGE_COLUMNS, UsageAmounts
from node_daemon.usage.query import BadUsageQuery, parse_day
from node_daemon.usage.sacct import SacctError, SacctJob, parse_sacct_jobs
from node_daemon.usage.store import ImportRecord, UsageStore

CSV_COLUMNS: tuple[str, ...] = ("day", "user", *USAGE_COLUMNS)

UsageRows = dict[tuple[str, str], UsageAmounts]


class UsageImportError(ValueError):
    """A file that cannot be imported; the message names the line and the problem."""


@dataclass(frozen=True)
class ImportSummary:
    """What an import added."""

    kind: str
    source: str
    sha256: str
    rows: int
    users: int
    first_day: str | None
    last_day: str | None
    gpu_seconds: float
    skipped: int


def _add(rows: UsageRows, day: str, user: str, amounts: UsageAmounts) -> None:
    rows[(day, user)] = rows.get((day, user), UsageAmounts()) + amounts


# -- our CSV -----------------------------------------------------------------


def parse_usage_csv(text: str) -> UsageRows:
    """Rows of `day,user,gpu_seconds,...` (extra columns such as workloads are ignored)."""
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in CSV_COLUMNS if c not in (reader.fieldnames or ())]
    if missing:
        raise UsageImportError(
            f"CSV line 1: missing column(s) {', '.join(missing)}; expected {','.join(CSV_COLUMNS)}"
        )
    rows: UsageRows = {}
    for line, record in enumerate(reader, start=2):
        day, user, amounts = _csv_record(record, line)
        _add(rows, day, user, amounts)
    return rows


def _csv_record(record: dict[str, str], line: int) -> tuple[str, str, UsageAmounts]:
    try:
        day = parse_day(record["day"] or "", "day")
    except BadUsageQuery as exc:
        raise UsageImportError(f"CSV line {line}: {exc}") from exc
    user = (record["user"] or "").strip()
    if not user:
        raise UsageImportError(f"CSV line {line}: user is empty")
    return day, user, UsageAmounts(*(_amount(record, c, line) for c in USAGE_COLUMNS))


def _amount(record: dict[str, str], column: str, line: int) -> float:
    text = (record[column] or "").strip()
    try:
        value = float(text) if text else 0.0
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise UsageImportError(f"CSV line {line}: {column} must be a number >= 0, got {text!r}")
    return value


# -- Slurm sacct ---------------------------------------------------------------


def parse_sacct(text: str, tz: dt.tzinfo | None = None) -> tuple[UsageRows, int]:
    """GPU-seconds per (UTC day, user) of the ended jobs in sacct output, and how many
    lines carried none (steps, jobs without GPUs or not ended).

    Busy GPU-seconds, memory and energy are unknown to sacct's accounting and stay 0.
    """
    jobs, skipped = _sacct_jobs(text, tz)
    rows: UsageRows = {}
    for job in jobs:
        for day, gpu_seconds in from_sacct(job, 0.0, "", per_node=False).day_gpu_seconds():
            _add(rows, day, job.user, UsageAmounts(gpu_seconds=gpu_seconds))
    return rows, skipped


def _sacct_jobs(text: str, tz: dt.tzinfo | None) -> tuple[list[SacctJob], int]:
    """The ended jobs (a file's running job would be billed to an unknown end)."""
    try:
        jobs, skipped = parse_sacct_jobs(text, tz)
    except SacctError as exc:
        raise UsageImportError(str(exc)) from exc
    ended = [job for job in jobs if job.end is not None]
    return ended, skipped + len(jobs) - len(ended)


@dataclass(frozen=True)
class JobImportSummary:
    """What a sacct import changed: jobs new to the store, jobs replaced (seen before)."""

    source: str
    new: int
    updated: int
    skipped: int
    users: int
    accounts: int
    gpu_seconds: float


def import_sacct(
    store: UsageStore, text: str, source: str, tz: dt.tzinfo | None = None
) -> JobImportSummary:
    """Store sacct output's ended jobs by (cluster, job id, step), in one transaction: a job
    already imported (an overlapping export, the same file again) is replaced, not added."""
    jobs, skipped = _sacct_jobs(text, tz)
    now = time.time()
    accounted = [from_sacct(job, now, source, per_node=False) for job in jobs]
    new, updated = store.put_jobs(accounted)
    return JobImportSummary(
        source, new, updated, skipped, len({j.user for j in jobs}),
        len({j.account for j in jobs if j.account}),
        sum(s for job in accounted for _, s in job.day_gpu_seconds()),
    )  # fmt: skip


# -- importing -------------------------------------------------------------------


def read_text(path: Path) -> tuple[bytes, str]:
    try:
        content = path.read_bytes()
        return content, content.decode("utf-8-sig")
    except OSError as exc:
        raise UsageImportError(f"cannot read {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise UsageImportError(f"{path} is not UTF-8 text: {exc}") from exc


def import_sacct_file(
    store: UsageStore, path: Path, tz: dt.tzinfo | None = None
) -> JobImportSummary:
    """A sacct export into the store, per job (safe to import again, or overlapping files)."""
    return import_sacct(store, read_text(path)[1], str(path.resolve()), tz)


def import_file(store: UsageStore, path: Path, kind: str = "csv") -> ImportSummary:
    """Add our CSV export to the store in one transaction.

    Raises UsageImportError for a bad file, AlreadyImported for one seen before.
    """
    content, text = read_text(path)
    rows, skipped = parse_usage_csv(text), 0
    digest = hashlib.sha256(content).hexdigest()
    record = ImportRecord(digest, kind, str(path.resolve()), int(time.time() * 1000), len(rows))
    store.add_import(record, rows)
    days = sorted({day for day, _ in rows})
    return ImportSummary(
        kind, str(path), digest, len(rows), len({u for _, u in rows}),
        days[0] if days else None, days[-1] if days else None,
        sum(a.gpu_seconds for a in rows.values()), skipped,
    )  # fmt: skip
