"""The process table's cells, as nvitop shows them: plain text from a ProcessRow, no Qt.

None (the daemon did not report it) reads as an en dash, never 0: a process at
0 % CPU and one whose CPU use is unknown must not look alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from console.fleet.process_row import ProcessRow

MISSING: Final = "\N{EN DASH}"
# Command last: it is the long one and takes the stretch.
HEADERS: Final = ("PID", "User", "GPU memory", "SM %", "CPU %", "Host memory", "Elapsed",
                  "Container / job", "Command")  # fmt: skip
ELAPSED_COLUMN: Final = HEADERS.index("Elapsed")


@dataclass(frozen=True)
class ProcessCells:
    texts: tuple[str, ...]
    # Sort keys, a column each: numbers sort as numbers (None first, as unknown).
    keys: tuple[object, ...]


def one_line(command: str | None) -> str:
    """A command as one line: a script passed inline (`python -c '...'`) wraps no table
    row and no dialog; its line breaks read as " ⏎ " (the tooltip keeps it whole)."""
    lines = (command or "").splitlines()
    return " \N{RETURN SYMBOL} ".join(line.strip() for line in lines if line.strip())


def mib_text(value: int | None) -> str:
    return MISSING if value is None else f"{value / 1024**2:,.0f} MiB"


def percent_text(value: float | None) -> str:
    return MISSING if value is None else f"{value:.0f} %"


def elapsed_text(seconds: float | None) -> str:
    """As ps's etime: "04:05", "1:02:03", "2-03:04:05" (days-hours)."""
    if seconds is None:
        return MISSING
    total = max(0, int(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes:02d}:{secs:02d}"


def elapsed_s(p: ProcessRow, now_unix_s: float) -> float | None:
    """How long the process has run: now minus its start time."""
    if p.start_time_unix_ms is None:
        return None
    return now_unix_s - p.start_time_unix_ms / 1000


def where_text(p: ProcessRow) -> str:
    """Its container (short id) and Slurm job, whichever it has: "3f2a9c1b0d4e · job 812"."""
    parts = [(p.container_id or "")[:12], f"job {p.slurm_job_id}" if p.slurm_job_id else ""]
    return " · ".join(part for part in parts if part)


def process_cells(p: ProcessRow, now_unix_s: float) -> ProcessCells:
    elapsed = elapsed_s(p, now_unix_s)
    texts = (
        str(p.pid), p.user or MISSING, mib_text(p.gpu_memory_bytes),
        percent_text(p.sm_util_pct), percent_text(p.cpu_pct), mib_text(p.host_memory_bytes),
        elapsed_text(elapsed), where_text(p), one_line(p.command) or MISSING,
    )  # fmt: skip
    keys = (
        p.pid, p.user or "", _key(p.gpu_memory_bytes), _key(p.sm_util_pct), _key(p.cpu_pct),
        _key(p.host_memory_bytes), _key(elapsed), texts[7], p.command or "",
    )  # fmt: skip
    return ProcessCells(texts, keys)


def _key(value: float | None) -> float:
    return -1.0 if value is None else float(value)
