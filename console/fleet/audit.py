"""The audit log of the fleet: every node's records in one list, filtered, exportable.

Each node keeps its own hash-chained log (QueryAudit, admin role). The console
asks every node it is admin on and shows the records together, newest first.
Plain Python: the Qt table model and the CSV export both read from here; the
request and the reply's decoding are console.connections' (queries, decode).
"""

from __future__ import annotations

import csv
import datetime as dt
import io
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

METHOD_PREFIX = "/gpufleet.v1.NodeService/"
# The actions worth filtering by (the methods that change something, and the audit query).
ACTIONS = (
    "KillProcess", "SubmitWorkload", "AssignWorkload", "CancelWorkload", "Reserve",
    "ReleaseReservation", "AcknowledgeAlert", "SilenceAlert", "QueryAudit",
)  # fmt: skip
DEFAULT_LIMIT = 1000


@dataclass(frozen=True)
class AuditFilter:
    """What to ask the nodes for. Empty text and 0 times mean "any"."""

    user: str = ""
    action: str = ""  # a substring of the method, e.g. "Kill"
    targets: tuple[str, ...] = ()  # the nodes to ask; () = every node we are admin on
    from_unix_ms: int = 0
    to_unix_ms: int = 0
    limit: int = DEFAULT_LIMIT


@dataclass(frozen=True)
class AuditRow:
    target: str  # the node's HOST:PORT
    seq: int
    time_unix_ms: int
    user: str
    peer: str
    method: str  # short: "KillProcess"
    aimed_at: str  # "gpu_index=1 pid=4321"
    params: str  # the request as JSON
    result: str  # "attempt", "OK", "DENIED: ...", "NOT_FOUND: ..."
    hash: str

    @property
    def uid(self) -> tuple[str, int]:
        return self.target, self.seq


def merge_audit(pages: Iterable[Sequence[AuditRow]]) -> list[AuditRow]:
    """All nodes' records in one list, newest first (ties: by node, then newest record)."""
    rows = [row for page in pages for row in page]
    rows.sort(key=lambda r: (-r.time_unix_ms, r.target, -r.seq))
    return rows


def time_text(unix_ms: int) -> str:
    """Local time as a person reads it in the table: 2024-06-03 14:05:09."""
    return dt.datetime.fromtimestamp(unix_ms / 1000).strftime("%Y-%m-%d %H:%M:%S")


def utc_text(unix_ms: int) -> str:
    """ISO 8601 in UTC, for files: 2024-06-03T12:05:09.123Z."""
    when = dt.datetime.fromtimestamp(unix_ms / 1000, dt.UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{unix_ms % 1000:03d}Z"


@dataclass(frozen=True)
class Column:
    header: str
    text: Callable[[AuditRow, str], str]  # (row, node name) -> cell


COLUMNS: tuple[Column, ...] = (
    Column("Time", lambda r, _n: time_text(r.time_unix_ms)),
    Column("Node", lambda _r, n: n),
    Column("User", lambda r, _n: r.user),
    Column("Peer", lambda r, _n: r.peer),
    Column("Method", lambda r, _n: r.method),
    Column("Target", lambda r, _n: r.aimed_at),
    Column("Result", lambda r, _n: r.result),
    Column("Params", lambda r, _n: r.params),
)
CSV_HEADER = ("time_utc", "node", "target", "seq", "user", "peer", "method", "aimed_at",
              "result", "params", "hash")  # fmt: skip


def audit_csv(rows: Sequence[AuditRow], node_name: Callable[[str], str]) -> str:
    """The export: one line per record, raw values, times in UTC; seq and hash kept for checks."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_HEADER)
    for r in rows:
        writer.writerow([utc_text(r.time_unix_ms), node_name(r.target), r.target, r.seq, r.user,
                         r.peer, r.method, r.aimed_at, r.result, r.params, r.hash])  # fmt: skip
    return out.getvalue()
