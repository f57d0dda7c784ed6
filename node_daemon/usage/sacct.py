"""Reading Slurm's `sacct -P` output: one allocation per job, whatever the column order.

With its header line (sacct's default) the columns may come in any order and
beside any others; without one, the old five columns of SACCT_COMMAND are
expected. GPUs come from AllocTRES (gres/gpu=4, gres/gpu:a100=2) or, from older
Slurm, AllocGRES (gpu:4, gpu:a100:2(IDX:0-1)). Job steps (123.batch, 123.0) are
skipped: the job's allocation already covers them.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

SACCT_FIELDS = ("JobID", "User", "Start", "End", "AllocTRES")
# What the header-less files of earlier versions were made with (still read).
SACCT_COMMAND = "sacct --parsable2 --noheader --format=JobID,User,Start,End,AllocTRES"
# What to export now: a header, the account, and the nodes (multi-node jobs).
SACCT_FORMAT = "JobID,User,Account,Start,End,State,AllocTRES,NodeList,NNodes,Cluster"
SACCT_EXPORT_COMMAND = f"sacct --parsable2 --allusers --allocations --format={SACCT_FORMAT}"
REQUIRED = ("JobID", "User", "Start", "End")
GPU_COLUMNS = ("AllocTRES", "AllocGRES")
# gres/gpu=4 (the total) or gres/gpu:a100=4 (per type, when the total is absent).
_TRES_TOTAL = re.compile(r"(?:^|,)gres/gpu=(\d+)(?=,|$)")
_TRES_TYPED = re.compile(r"(?:^|,)gres/gpu:([^=,]+)=(\d+)(?=,|$)")
# gpu:4, gpu:a100:2, gpu:a100:2(IDX:0-1); several separated by commas.
_GRES = re.compile(r"(?:^|,)gpu(?::([^:,()]+))?:(\d+)(?:\([^)]*\))?(?=,|$)")
# sacct prints these instead of a time for jobs that never started or still run.
_NO_TIME = {"", "Unknown", "None"}
UNKNOWN_USER = "(unknown)"


class SacctError(ValueError):
    """Output that cannot be read; the message names the line and the column."""


@dataclass(frozen=True)
class SacctJob:
    """One job's allocation. `end` None: still running (or never ended) when sacct answered."""

    cluster: str
    job_id: str
    user: str
    account: str
    start: dt.datetime  # UTC
    end: dt.datetime | None  # UTC
    gpus: int
    gpu_type: str  # the gres type ("a100"), "" where Slurm was not told one
    nodes: int
    state: str


def gpu_allocation(text: str) -> tuple[int, str]:
    """(GPUs, type) from AllocTRES or AllocGRES; the type "" when untyped or mixed."""
    total = _TRES_TOTAL.search(text)
    typed = _TRES_TYPED.findall(text) or _GRES.findall(text)
    types = {t for t, _ in typed if t}
    kind = types.pop() if len(types) == 1 else ""
    if total:
        return int(total.group(1)), kind
    return sum(int(n) for _, n in typed), kind


def gpu_count(alloc_tres: str) -> int:
    """GPUs in an AllocTRES or AllocGRES string."""
    return gpu_allocation(alloc_tres)[0]


def count_hosts(node_list: str) -> int:
    """How many hosts a Slurm host list names: "n[01-04,07],gpu5" is 6; "" or None is 1."""
    count = 0
    for part in re.finditer(r"[^,\[]+(?:\[([^\]]*)\])?", node_list):
        ranges = part.group(1)
        if ranges is None:
            count += part.group(0).strip() not in ("", "None assigned")
            continue
        for item in ranges.split(","):
            low, _, high = item.partition("-")
            count += int(high) - int(low) + 1 if high and low.isdigit() and high.isdigit() else 1
    return max(count, 1)


def split_by_utc_day(start: dt.datetime, end: dt.datetime) -> Iterator[tuple[str, float]]:
    """(day, seconds) for each UTC day the interval [start, end) touches."""
    cursor = start
    while cursor < end:
        midnight = dt.datetime.combine(cursor.date() + dt.timedelta(days=1), dt.time(), dt.UTC)
        part_end = min(end, midnight)
        yield cursor.date().isoformat(), (part_end - cursor).total_seconds()
        cursor = part_end


class _Columns:
    """Where each field is on a line: from the header, or the old fixed five."""

    def __init__(self, positions: Mapping[str, int], width: int, header: bool) -> None:
        self.positions, self.width, self.header = positions, width, header

    @classmethod
    def from_header(cls, fields: list[str], line: int) -> _Columns:
        names = [f.strip() for f in fields]
        by_lower = {n.lower(): i for i, n in enumerate(names) if n}
        canonical = {c.lower(): c for c in (*REQUIRED, *GPU_COLUMNS, *_OPTIONAL)}
        positions = {canonical[k]: i for k, i in by_lower.items() if k in canonical}
        missing = [c for c in REQUIRED if c not in positions]
        if not any(c in positions for c in GPU_COLUMNS):
            missing.append("AllocTRES (or AllocGRES)")
        if missing:
            raise SacctError(
                f"sacct line {line}: the header lacks column(s) {', '.join(missing)}; "
                f"export with: {SACCT_EXPORT_COMMAND}"
            )
        return cls(positions, len(names), True)

    def get(self, fields: list[str], name: str) -> str:
        index = self.positions.get(name)
        return fields[index].strip() if index is not None else ""


_OPTIONAL = ("Account", "State", "NodeList", "NNodes", "Cluster")
_OLD = _Columns({name: i for i, name in enumerate(SACCT_FIELDS)}, len(SACCT_FIELDS), False)


def _is_header(fields: list[str]) -> bool:
    return any(f.strip().lower() == "jobid" for f in fields)


def _time(text: str, tz: dt.tzinfo | None, where: str) -> dt.datetime:
    try:
        parsed = dt.datetime.fromisoformat(text)
    except ValueError as exc:
        raise SacctError(f"{where}: {text!r} is not a time like 2024-05-31T13:45:00") from exc
    if parsed.tzinfo is None:
        # sacct prints local time without a zone; None here means this machine's zone.
        parsed = parsed.replace(tzinfo=tz) if tz is not None else parsed.astimezone()
    return parsed.astimezone(dt.UTC)


def _job(fields: list[str], cols: _Columns, line: int, tz: dt.tzinfo | None) -> SacctJob | None:
    """One job, or None for a line without GPU time of its own (a step, no GPUs, no start)."""
    if len(fields) != cols.width:
        expected = "the header's" if cols.header else f"({','.join(SACCT_FIELDS)})"
        raise SacctError(
            f"sacct line {line}: expected {cols.width} fields separated by | {expected}, "
            f"got {len(fields)}; produce the file with: {SACCT_EXPORT_COMMAND}"
        )
    job_id = cols.get(fields, "JobID")
    if not job_id:
        raise SacctError(f"sacct line {line}, column JobID: empty")
    if "." in job_id:  # a step (123.batch, 123.0): inside the job's allocation
        return None
    start, end = cols.get(fields, "Start"), cols.get(fields, "End")
    gpus, kind = gpu_allocation(cols.get(fields, "AllocTRES") or cols.get(fields, "AllocGRES"))
    if start in _NO_TIME or gpus == 0:
        return None
    return SacctJob(
        cluster=cols.get(fields, "Cluster"),
        job_id=job_id,
        user=cols.get(fields, "User") or UNKNOWN_USER,
        account=cols.get(fields, "Account"),
        start=_time(start, tz, f"sacct line {line}, column Start"),
        end=None if end in _NO_TIME else _time(end, tz, f"sacct line {line}, column End"),
        gpus=gpus,
        gpu_type=kind,
        nodes=_nodes(cols, fields, line),
        state=cols.get(fields, "State").split(" ")[0],  # "CANCELLED by 1000"
    )


def _nodes(cols: _Columns, fields: list[str], line: int) -> int:
    text = cols.get(fields, "NNodes")
    if text:
        if not text.isdigit() or int(text) == 0:
            raise SacctError(f"sacct line {line}, column NNodes: {text!r} is not a node count")
        return int(text)
    return count_hosts(cols.get(fields, "NodeList"))


def parse_sacct_jobs(text: str, tz: dt.tzinfo | None = None) -> tuple[list[SacctJob], int]:
    """The jobs of `sacct -P` output, and how many non-empty lines carried none."""
    jobs: list[SacctJob] = []
    skipped = 0
    cols: _Columns | None = None
    for line, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        fields = raw.split("|")
        if cols is None:
            cols = _Columns.from_header(fields, line) if _is_header(fields) else _OLD
            if cols.header:
                continue
        elif _is_header(fields):  # two exports concatenated: a header again
            cols = _Columns.from_header(fields, line)
            continue
        job = _job(fields, cols, line, tz)
        if job is None:
            skipped += 1
        else:
            jobs.append(job)
    return jobs, skipped
