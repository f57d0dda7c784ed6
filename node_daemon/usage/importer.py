"""Importing usage history from before gpufleet: our own CSV export, or Slurm's sacct.

Each file is imported whole or not at all, in one transaction, and remembered
by the SHA-256 of its content: the same file a second time is refused, so
history is never counted twice.
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import io
import math
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from node_daemon.usage.amounts import USAGE_COLUMNS, UsageAmounts
from node_daemon.usage.query import BadUsageQuery, parse_day
from node_daemon.usage.store import ImportRecord, UsageStore

CSV_COLUMNS: tuple[str, ...] = ("day", "user", *USAGE_COLUMNS)
SACCT_FIELDS = ("JobID", "User", "Start", "End", "AllocTRES")
SACCT_COMMAND = "sacct --parsable2 --noheader --format=JobID,User,Start,End,AllocTRES"
# gres/gpu=4 (the total) or gres/gpu:a100=4 (per type, when the total is absent).
_GPU_TOTAL = re.compile(r"(?:^|,)gres/gpu=(\d+)(?=,|$)")
_GPU_TYPED = re.compile(r"(?:^|,)gres/gpu:[^=,]+=(\d+)(?=,|$)")
# sacct prints these instead of a time for jobs that never started or still run.
_NO_TIME = {"", "Unknown", "None"}

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


@dataclass(frozen=True)
class SacctJob:
    job_id: str
    user: str
    start: dt.datetime  # UTC
    end: dt.datetime  # UTC
    gpus: int


def gpu_count(alloc_tres: str) -> int:
    """GPUs in an AllocTRES string: gres/gpu=N, else the sum of gres/gpu:TYPE=N."""
    total = _GPU_TOTAL.search(alloc_tres)
    if total:
        return int(total.group(1))
    return sum(int(n) for n in _GPU_TYPED.findall(alloc_tres))


def split_by_utc_day(start: dt.datetime, end: dt.datetime) -> Iterator[tuple[str, float]]:
    """(day, seconds) for each UTC day the interval [start, end) touches."""
    cursor = start
    while cursor < end:
        midnight = dt.datetime.combine(cursor.date() + dt.timedelta(days=1), dt.time(), dt.UTC)
        part_end = min(end, midnight)
        yield cursor.date().isoformat(), (part_end - cursor).total_seconds()
        cursor = part_end


def _sacct_time(text: str, tz: dt.tzinfo | None, line: int) -> dt.datetime:
    try:
        parsed = dt.datetime.fromisoformat(text)
    except ValueError as exc:
        raise UsageImportError(
            f"sacct line {line}: {text!r} is not a time like 2024-05-31T13:45:00"
        ) from exc
    if parsed.tzinfo is None:
        # sacct prints local time without a zone; None here means this machine's zone.
        parsed = parsed.replace(tzinfo=tz) if tz is not None else parsed.astimezone()
    return parsed.astimezone(dt.UTC)


def parse_sacct_line(text: str, line: int, tz: dt.tzinfo | None) -> SacctJob | None:
    """One job, or None for a line that carries no GPU time of its own (steps, running jobs)."""
    fields = text.split("|")
    if len(fields) != len(SACCT_FIELDS):
        raise UsageImportError(
            f"sacct line {line}: expected {len(SACCT_FIELDS)} fields separated by | "
            f"({','.join(SACCT_FIELDS)}), got {len(fields)}; produce the file with: {SACCT_COMMAND}"
        )
    job_id, user, start, end, tres = (f.strip() for f in fields)
    if "." in job_id or job_id == "JobID":  # a step (123.batch, 123.0) or a header line
        return None
    if start in _NO_TIME or end in _NO_TIME:  # never started, or still running
        return None
    gpus = gpu_count(tres)
    if gpus == 0:
        return None
    return SacctJob(
        job_id, user or "(unknown)", _sacct_time(start, tz, line), _sacct_time(end, tz, line), gpus
    )


def parse_sacct(text: str, tz: dt.tzinfo | None = None) -> tuple[UsageRows, int]:
    """GPU-seconds per (UTC day, user) from sacct output, and how many lines were skipped.

    Busy GPU-seconds, memory and energy are unknown to sacct's accounting and stay 0.
    """
    rows: UsageRows = {}
    skipped = 0
    for line, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        job = parse_sacct_line(raw, line, tz)
        if job is None:
            skipped += 1
            continue
        for day, seconds in split_by_utc_day(job.start, job.end):
            _add(rows, day, job.user, UsageAmounts(gpu_seconds=seconds * job.gpus))
    return rows, skipped


# -- importing -------------------------------------------------------------------


def import_file(
    store: UsageStore, path: Path, kind: str, tz: dt.tzinfo | None = None
) -> ImportSummary:
    """Parse `path` as `kind` ("csv" or "sacct") and add it to the store in one transaction.

    Raises UsageImportError for a bad file, AlreadyImported for one seen before.
    """
    try:
        content = path.read_bytes()
        text = content.decode("utf-8-sig")
    except OSError as exc:
        raise UsageImportError(f"cannot read {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise UsageImportError(f"{path} is not UTF-8 text: {exc}") from exc
    rows, skipped = parse_sacct(text, tz) if kind == "sacct" else (parse_usage_csv(text), 0)
    digest = hashlib.sha256(content).hexdigest()
    record = ImportRecord(digest, kind, str(path.resolve()), int(time.time() * 1000), len(rows))
    store.add_import(record, rows)
    days = sorted({day for day, _ in rows})
    return ImportSummary(
        kind, str(path), digest, len(rows), len({u for _, u in rows}),
        days[0] if days else None, days[-1] if days else None,
        sum(a.gpu_seconds for a in rows.values()), skipped,
    )  # fmt: skip
