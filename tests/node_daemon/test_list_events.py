"""ListEvents: the journal's events in a time range, of the kinds asked, the newest `limit`.

A real daemon over a journal written beforehand at chosen times (a night's events, a
clock stepped back, a damaged row), asked over real gRPC on loopback.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.journal.event_journal import EventJournal
from node_daemon.server import JOURNAL_FILE
from tests.conftest import DaemonFactory

HOUR_MS = 3_600_000
NIGHT_MS = int(time.time() * 1000) - 6 * HOUR_MS  # the night's first event
ACK, DRAIN, HEALING = (pb.EVENT_KIND_ALERT_ACKNOWLEDGED, pb.EVENT_KIND_GPU_DRAINED,
                       pb.EVENT_KIND_HEALING_ACTION)  # fmt: skip
# (minutes after NIGHT_MS, kind, summary), in the journal's order. The clock was stepped
# back an hour before "late ack": it is stamped before the drain written ahead of it.
NIGHT = (
    (0, pb.EVENT_KIND_DAEMON_STARTED, "started"),
    (10, pb.EVENT_KIND_ALERT_RAISED, "hot"),
    (20, ACK, "ack by carol"),
    (22, DRAIN, "drained by carol"),
    (23, HEALING, "power cap"),
    (24, HEALING, "power cap again"),
    (-30, ACK, "late ack"),
    (90, pb.EVENT_KIND_ALERT_CLEARED, "cooled"),
)


@pytest.fixture
def stub(start_daemon: DaemonFactory, tmp_path: Path) -> Iterator[pb_grpc.NodeServiceStub]:
    journal = EventJournal(tmp_path / JOURNAL_FILE)
    journal.record([pb.Event(time_unix_ms=NIGHT_MS + minutes * 60_000, kind=kind, summary=text)
                    for minutes, kind, text in NIGHT])  # fmt: skip
    journal.close()
    with sqlite3.connect(tmp_path / JOURNAL_FILE) as db:  # "power cap again": damaged on disk
        db.execute("UPDATE events SET body = ? WHERE seq = 6", (b"\xff\xff\xff\x07",))
    daemon = start_daemon(gpus=1, state_dir=tmp_path)
    with grpc.insecure_channel(str(daemon.address)) as channel:
        yield pb_grpc.NodeServiceStub(channel)


def listed(stub: pb_grpc.NodeServiceStub, **request: object) -> list[str]:
    answer = stub.ListEvents(pb.ListEventsRequest(**request), timeout=5)  # type: ignore[arg-type]
    assert all(e.replayed and e.journal_id == answer.journal_id for e in answer.events)
    return [e.summary for e in answer.events]


def test_the_events_of_a_range_oldest_first_of_the_kinds_asked(
    stub: pb_grpc.NodeServiceStub,
) -> None:
    minute = 60_000
    # The night's first half hour, by its stamps (both ends in): journal order, the
    # stepped-back ack among them; the damaged row left out, the daemon's own start
    # (now) outside the range.
    assert listed(stub, since_unix_ms=NIGHT_MS - 40 * minute,
                  until_unix_ms=NIGHT_MS + 22 * minute) == [
        "started", "hot", "ack by carol", "drained by carol", "late ack"]  # fmt: skip
    assert listed(stub, since_unix_ms=NIGHT_MS, kinds=[ACK, DRAIN]) == [
        "ack by carol", "drained by carol"]  # fmt: skip
    # The newest `limit` of the range, oldest first (the damaged row passed over, not
    # counted), and the answer says some were left out.
    answer = stub.ListEvents(pb.ListEventsRequest(since_unix_ms=NIGHT_MS,
                                                  until_unix_ms=NIGHT_MS + 100 * minute,
                                                  limit=2), timeout=5)  # fmt: skip
    assert [e.summary for e in answer.events] == ["power cap", "cooled"] and answer.truncated
    assert answer.events[0].seq < answer.events[1].seq
    listing = stub.ListAlerts(pb.ListAlertsRequest(), timeout=5)
    assert answer.journal_id == listing.journal_id
    # Up to now (until 0): the daemon's own start is in too.
    since = NIGHT_MS - HOUR_MS
    everything = stub.ListEvents(pb.ListEventsRequest(since_unix_ms=since), timeout=5)
    assert everything.events[-1].kind == pb.EVENT_KIND_DAEMON_STARTED
    assert not everything.truncated and len(everything.events) == len(NIGHT)  # -1 damaged +1


@pytest.mark.parametrize(
    ("request_fields", "said"),
    [
        ({}, "since_unix_ms must be a Unix time in ms after 1970, got 0"),
        ({"since_unix_ms": -5}, "since_unix_ms must be a Unix time in ms after 1970, got -5"),
        ({"since_unix_ms": 2_000, "until_unix_ms": 1_000}, "the range must start before it ends"),
        ({"since_unix_ms": 1_000, "until_unix_ms": 1_000}, "the range must start before it ends"),
        ({"since_unix_ms": 1, "limit": 10_001}, "limit 10001 is more than 10,000"),
        ({"since_unix_ms": 1, "kinds": [0]}, "unknown event kind 0"),
        ({"since_unix_ms": 1, "kinds": [ACK, 4096]}, "unknown event kind 4096"),
    ],
)
def test_a_bad_request_is_told_what_is_wrong_and_the_node_keeps_serving(
    stub: pb_grpc.NodeServiceStub, request_fields: dict[str, object], said: str
) -> None:
    with pytest.raises(grpc.RpcError) as refused:
        stub.ListEvents(pb.ListEventsRequest(**request_fields), timeout=5)  # type: ignore[arg-type]
    assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert said in (refused.value.details() or "")
    assert listed(stub, since_unix_ms=NIGHT_MS, kinds=[DRAIN]) == ["drained by carol"]
