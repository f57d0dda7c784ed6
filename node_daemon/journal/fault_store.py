"""The GPUs' fault records in the journal's database: one record per GPU, by its UUID.

Kept in the journal's `records` table (kind "gpu_faults", id the GPU's UUID), so the
record follows the GPU, not its index, and shares the journal's file, WAL, full-disk
handling and state directory: a restarted or reinstalled daemon, or a restored state
directory, finds it. The body is JSON, readable with sqlite3.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from node_daemon.health.fault_record import GpuFaults, Incident
from node_daemon.health.model import HealthState
from node_daemon.journal.event_journal import EventJournal, StoredRecord

KIND = "gpu_faults"
VERSION = 1


class JournalFaultStore:
    def __init__(self, journal: EventJournal) -> None:
        self._journal = journal

    def load(self) -> Mapping[str, GpuFaults]:
        records = self._journal.readable_records(KIND, faults_from_body, "a GPU fault record")
        return {record.uuid: record for record in records}

    def save(self, record: GpuFaults) -> None:
        updated = max((i.last_ms for i in record.incidents), default=0)
        stored = StoredRecord(KIND, record.uuid, True, updated, faults_body(record))
        self._journal.record([], records=[stored])


def faults_body(record: GpuFaults) -> bytes:
    data = {
        "version": VERSION,
        "uuid": record.uuid,
        "gpu_index": record.gpu_index,
        "incidents": [
            {
                "kind": i.kind,
                "state": i.state.name,
                "started_ms": i.started_ms,
                "last_ms": i.last_ms,
                "count": i.count,
                "codes": list(i.codes),
                "ended": i.ended,
            }
            for i in record.incidents
        ],
    }
    return json.dumps(data, sort_keys=True).encode()


def faults_from_body(body: bytes) -> GpuFaults:
    data = json.loads(body)
    if not isinstance(data, dict) or data.get("version") != VERSION:
        raise ValueError(f"version {data.get('version') if isinstance(data, dict) else data!r},"
                         f" expected {VERSION}")  # fmt: skip
    uuid = data["uuid"]
    if not isinstance(uuid, str) or not uuid:
        raise ValueError(f"no GPU UUID: {uuid!r}")
    return GpuFaults(
        uuid, _whole(data["gpu_index"]), tuple(_incident(i) for i in data["incidents"])
    )


def _incident(data: Any) -> Incident:
    if not isinstance(data, dict):
        raise TypeError(f"an incident must be an object, got {data!r}")
    codes = data["codes"]
    if not isinstance(codes, list):
        raise TypeError(f"an incident's codes must be a list, got {codes!r}")
    return Incident(
        kind=str(data["kind"]), state=HealthState[data["state"]],
        started_ms=_whole(data["started_ms"]), last_ms=_whole(data["last_ms"]),
        count=_whole(data["count"]), codes=tuple(_whole(c) for c in codes),
        ended=bool(data["ended"]),
    )  # fmt: skip


def _whole(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected a whole number, got {value!r}")
    return value
