"""The GPUs' lasting health in the journal's database: one record per GPU.

Kept in the journal's `records` table (kind "gpu_health", id "gpu-N"), so it
shares the journal's file, WAL, full-disk handling and state directory. The
body is JSON, not a gpufleet.v1 message: the sticky reasons, the drain and the
repeat-offender history have no message of their own, and a person reading the
state file with sqlite3 sees what is kept.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from node_daemon.health.model import Drain, HealthReason, HealthState
from node_daemon.health.store import StoredHealth
from node_daemon.journal.event_journal import EventJournal, StoredRecord

KIND = "gpu_health"
VERSION = 1


class JournalHealthStore:
    """A HealthStore over the event journal (node_daemon.health.store.HealthStore)."""

    def __init__(self, journal: EventJournal) -> None:
        self._journal = journal

    def load(self) -> Mapping[int, StoredHealth]:
        records = self._journal.readable_records(KIND, health_from_body, "a GPU health record")
        return {record.gpu_index: record for record in records}

    def save(self, record: StoredHealth) -> None:
        updated = record.drain.since_ms if record.drain else 0
        updated = max(updated, record.last_fault_ms or 0, record.repaired_ms or 0)
        stored = StoredRecord(
            KIND, f"gpu-{record.gpu_index}", not record.empty, updated, health_body(record)
        )
        self._journal.record([], records=[stored])


def health_body(record: StoredHealth) -> bytes:
    data = {
        "version": VERSION,
        "gpu_index": record.gpu_index,
        "uuid": record.uuid,
        "boot_id": record.boot_id,
        "sticky": [_reason(r) for r in record.sticky],
        "drain": None if record.drain is None else vars(record.drain),
        "power_capped_w": record.power_capped_w,
        "last_fault_ms": record.last_fault_ms,
        "repaired_ms": record.repaired_ms,
    }
    return json.dumps(data, sort_keys=True).encode()


def health_from_body(body: bytes) -> StoredHealth:
    data = json.loads(body)
    if data.get("version") != VERSION:
        raise ValueError(f"version {data.get('version')!r}, expected {VERSION}")
    drain = data["drain"]
    return StoredHealth(
        gpu_index=int(data["gpu_index"]),
        uuid=_text(data["uuid"]),
        boot_id=_text(data["boot_id"]),
        sticky=tuple(_parsed_reason(r) for r in data["sticky"]),
        drain=None
        if drain is None
        else Drain(str(drain["by"]), str(drain["reason"]), int(drain["since_ms"])),
        power_capped_w=_number(data["power_capped_w"]),
        last_fault_ms=_whole(data["last_fault_ms"]),
        repaired_ms=_whole(data["repaired_ms"]),
    )


def _reason(reason: HealthReason) -> dict[str, Any]:
    return {
        "code": reason.code,
        "state": reason.state.name,
        "summary": reason.summary,
        "action": reason.action,
        "since_ms": reason.since_ms,
        "lead_time_s": reason.lead_time_s,
    }


def _parsed_reason(data: dict[str, Any]) -> HealthReason:
    return HealthReason(
        str(data["code"]), HealthState[data["state"]], str(data["summary"]),
        str(data["action"]), int(data["since_ms"]), _whole(data["lead_time_s"]),
    )  # fmt: skip


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def _whole(value: Any) -> int | None:
    return None if value is None else int(value)
