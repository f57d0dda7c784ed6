"""Upgrades keep every record: a state directory of the previous release opens in this one.

tests/fixtures/state-0.1.0.tar.gz was written by the daemon of 0.1.0 as first
released (commit 4d7a2ac, before state files were versioned) by
tests/fixtures/capture_state.py; state-0.1.0.json beside it has its row counts.
Real daemon processes, real SQLite files and the real `gpufleet audit verify`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon import __version__
from node_daemon.history.settings import HistorySettings
from node_daemon.history.store import HistoryStore
from node_daemon.history.tiers import tiers_of
from node_daemon.journal.event_journal import FILE_SCHEMA as JOURNAL_SCHEMA
from node_daemon.journal.schema_version import (
    FileSchema,
    StateFileTooNew,
    backup_path,
    bring_up_to_date,
    stamp_only,
)
from node_daemon.server import state_files
from tests.daemon_process import DaemonProcess

FIXTURES = Path(__file__).parent.parent / "fixtures"
PREVIOUS = FIXTURES / "state-0.1.0.tar.gz"
# The node the capture ran: same GPUs, so the records' GPU indices stay valid.
NODE_ARGS = ("--backend", "simulated", "--gpus", "4", "--seed", "2", "--model", "h100",
             "--hostname", "node-prev")  # fmt: skip


def unpack(into: Path) -> Path:
    """The captured state directory, as `into`/state; its files as the old release left them."""
    with tarfile.open(PREVIOUS) as archive:
        members = archive.getmembers()
        # Our own fixture, checked all the same (Debian 12's Python 3.11.2 predates
        # extractall's filter=): plain files and folders under state/, nothing else.
        for member in members:
            inside = member.name == "state" or member.name.startswith("state/")
            assert inside and ".." not in member.name and (member.isfile() or member.isdir()), (
                member.name
            )
        safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        archive.extractall(into, members=members, **safe)
    return into / "state"


def reading(path: Path) -> contextlib.closing[sqlite3.Connection]:
    """A read-only look that leaves nothing behind (the daemons stop cleanly: no WAL)."""
    return contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True))


def rows(path: Path, table: str, order: str) -> list[tuple[Any, ...]]:
    with reading(path) as db:
        return list(db.execute(f"SELECT * FROM {table} ORDER BY {order}"))


def user_version(path: Path) -> int:
    with reading(path) as db:
        return int(db.execute("PRAGMA user_version").fetchone()[0])


def stamp_version(path: Path, version: int) -> None:
    """What a later release's daemon leaves: its layout version in the header."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute(f"PRAGMA user_version = {version}")


def tree_digest(directory: Path) -> dict[str, str]:
    """Every file under `directory` (names and contents): what "untouched" means."""
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}  # fmt: skip


def audit_verify(state: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "node_daemon", "audit", "verify", "--state-dir", str(state)]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


@pytest.fixture
def upgraded(tmp_path: Path) -> Iterator[tuple[DaemonProcess, Path, Path]]:
    """Today's daemon on the captured directory; also a pristine copy to compare with."""
    before = unpack(tmp_path / "before")
    state = unpack(tmp_path)
    daemon = DaemonProcess(tmp_path, *NODE_ARGS).start()
    yield daemon, state, before
    daemon.stop()


def test_the_fixture_is_the_previous_release_s_unversioned_directory(tmp_path: Path) -> None:
    """Guards the test below: what it upgrades is really pre-versioning and holds records."""
    state = unpack(tmp_path)
    counts = json.loads(PREVIOUS.with_suffix("").with_suffix(".json").read_text())["counts"]
    for path, _ in state_files(state):
        assert user_version(path) == 0, path
    assert counts["journal.sqlite3:events"] > 0 and counts["audit.sqlite3:audit"] > 0
    assert len(rows(state / "journal.sqlite3", "events", "seq")) == counts["journal.sqlite3:events"]


def test_a_previous_release_s_state_opens_with_every_record(
    upgraded: tuple[DaemonProcess, Path, Path],
) -> None:
    daemon, state, before = upgraded
    old_events = rows(before / "journal.sqlite3", "events", "seq")
    with grpc.insecure_channel(daemon.address) as channel:
        stub = pb_grpc.NodeServiceStub(channel)
        # The journal: every event, same numbers, same bodies; new ones follow on.
        events: list[pb.Event] = []
        stream = stub.StreamEvents(pb.StreamEventsRequest(after_seq=0), timeout=30)
        for event in stream:
            events.append(event)
            if len(events) == len(old_events):
                break
        stream.cancel()
        assert [e.seq for e in events] == [seq for seq, *_ in old_events]
        # As stored, plus what the stream stamps on each (its seq, journal, replay mark).
        journal_id = rows(before / "journal.sqlite3", "meta", "key")
        assert {e.journal_id for e in events} == {v for k, v in journal_id if k == "journal_id"}
        for event, (seq, *_, body) in zip(events, old_events, strict=True):
            stored = pb.Event.FromString(body)
            stored.MergeFrom(
                pb.Event(seq=seq, replayed=event.replayed, journal_id=event.journal_id)
            )
            assert event == stored, seq
        # Reservations: the held one (active while its time has not come) and the released.
        listed = stub.ListReservations(pb.ListReservationsRequest(include_ended=True), timeout=5)
        by_id = {r.id: r for r in listed.reservations}
        assert (by_id["r-1"].holder, list(by_id["r-1"].gpu_indices)) == ("team:ml", [2])
        assert by_id["r-1"].active == (by_id["r-1"].until_unix_ms > time.time() * 1000)
        assert (by_id["r-2"].holder, by_id["r-2"].active) == ("bob", False)
        # Workloads: the finished one with its output, the queued one still waiting.
        workloads = stub.ListWorkloads(pb.ListWorkloadsRequest(include_ended=True), timeout=5)
        named = {w.name: w for w in workloads.workloads}
        assert named["finished"].state == pb.WORKLOAD_STATE_FINISHED
        assert named["finished"].exit_code == 0
        output = stub.GetWorkloadOutput(
            pb.GetWorkloadOutputRequest(workload_id=named["finished"].id), timeout=5
        )
        assert output.output == b"captured output\n"
        assert (named["queued"].state, named["queued"].priority) == (pb.WORKLOAD_STATE_QUEUED, 5)
        # The alert and who acknowledged it.
        alerts = stub.ListAlerts(pb.ListAlertsRequest(include_cleared=True), timeout=5).alerts
        assert [a.acknowledged_by for a in alerts if a.id == "a-1"] == ["otto"]
        # The audit log, served.
        audit = stub.QueryAudit(pb.QueryAuditRequest(limit=1000), timeout=5).records
        assert {"Reserve", "ReleaseReservation", "SubmitWorkload", "AcknowledgeAlert"} <= {
            r.method.rsplit("/", 1)[-1] for r in audit
        }
        # Usage: the users the old release billed, served (from the start of records).
        old_users = rows(before / "usage.sqlite3", "user_usage", "day, user")
        served = stub.QueryUsage(pb.QueryUsageRequest(group_by=pb.USAGE_GROUPING_USER), timeout=5)
        assert {str(r[1]) for r in old_users} <= {row.key for row in served.rows}
    daemon.stop()
    # On disk: every row the old release wrote is there as it was (events and audit
    # records are never changed; this run only adds after them), or only grew (usage).
    for name, table, order in (("journal", "events", "seq"), ("audit", "audit", "seq")):
        old = rows(before / f"{name}.sqlite3", table, order)
        assert rows(state / f"{name}.sqlite3", table, order)[: len(old)] == old, table
    kept = {(r[0], r[1]) for r in rows(state / "journal.sqlite3", "records", "kind, id")}
    assert {(r[0], r[1]) for r in rows(before / "journal.sqlite3", "records", "kind, id")} <= kept
    new_users = {(r[0], r[1]): r[2:] for r in rows(state / "usage.sqlite3", "user_usage", "1")}
    for day, user, *amounts in old_users:
        assert all(n >= o for n, o in zip(new_users[(day, user)], amounts, strict=True)), user
    for path, schema in state_files(state):
        assert user_version(path) == schema.version, path
        # The copy a roll-back restores: the file as the old release left it.
        copy = backup_path(path, schema.version)
        assert user_version(copy) == 0, copy
        assert rows(copy, "sqlite_master", "name") == rows(
            before / path.name, "sqlite_master", "name"
        )
    assert rows(backup_path(state / "audit.sqlite3", 1), "audit", "seq") == rows(
        before / "audit.sqlite3", "audit", "seq"
    )
    verified = audit_verify(state)
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_the_history_tiers_of_the_previous_release_read_back_whole(tmp_path: Path) -> None:
    """Every point of every tier (raw, 10 s, 1 min) decodes after the migration.

    In process and without sweeps, so that retention (which counts back from the
    newest sweep) drops none of the captured points, however old the fixture is.
    """
    state = unpack(tmp_path)
    before = _points_per_tier(state / "history.sqlite3")
    assert set(before) == {0, 1, 2}, "the fixture holds every tier"
    store = HistoryStore(state / "history.sqlite3", HistorySettings(), 500)
    try:
        for tier in tiers_of(HistorySettings()):
            points = store.read(tier, 0, 2**62)
            assert len(points) == before[tier.id], tier.name
            assert all(len(p.means) == len(points[0].means) > 0 for p in points)
        assert store.corrupt_rows == 0
    finally:
        store.close()
    assert user_version(state / "history.sqlite3") == 1


def _points_per_tier(path: Path) -> dict[int, int]:
    with reading(path) as db:
        return dict(db.execute("SELECT tier, COUNT(*) FROM points GROUP BY tier"))


def test_an_older_daemon_refuses_a_newer_state_directory_and_touches_nothing(
    tmp_path: Path,
) -> None:
    """A state file stamped by a later release: this daemon says so and exits 2.

    The audit log is the one stamped, the second file checked: the journal before
    it must not have been migrated either.
    """
    state = unpack(tmp_path)
    future = state_files(state)[1][1].version + 1
    stamp_version(state / "audit.sqlite3", future)
    digest = tree_digest(state)
    command = [sys.executable, "-m", "node_daemon", "daemon", *NODE_ARGS,
               "--listen", "127.0.0.1:0", "--state-dir", str(state)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert (f"{state / 'audit.sqlite3'}: audit log schema version {future} was written by a "
            f"newer gpufleet; this daemon ({__version__}) knows versions up to "
            f"{future - 1}") in done.stderr  # fmt: skip
    assert "Traceback" not in done.stderr
    assert tree_digest(state) == digest


# --- The mechanism, on a copy of the captured journal ---------------------------------


def _add_column(db: sqlite3.Connection) -> None:
    db.execute("ALTER TABLE events ADD COLUMN note TEXT NOT NULL DEFAULT 'migrated'")


def _fail(db: sqlite3.Connection) -> None:
    raise sqlite3.OperationalError("migration 2 fails")


def _open(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


def test_migrations_run_in_order_after_a_backup_of_the_old_file(tmp_path: Path) -> None:
    state = unpack(tmp_path)
    journal = state / "journal.sqlite3"
    old = rows(journal, "events", "seq")
    schema = FileSchema("event journal", (stamp_only, _add_column))
    db = _open(journal)
    try:
        assert bring_up_to_date(db, journal, schema) is False
    finally:
        db.close()
    assert user_version(journal) == 2
    assert [r[-1] for r in rows(journal, "events", "seq")] == ["migrated"] * len(old)
    copy = backup_path(journal, 2)
    assert (user_version(copy), rows(copy, "events", "seq")) == (0, old)


def test_a_failed_migration_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    state = unpack(tmp_path)
    journal = state / "journal.sqlite3"
    old = rows(journal, "events", "seq")
    db = _open(journal)
    try:
        with pytest.raises(sqlite3.OperationalError, match="migration 2 fails"):
            bring_up_to_date(db, journal, FileSchema("event journal", (_add_column, _fail)))
    finally:
        db.close()
    # The first migration's column is rolled back with the version stamp.
    assert (user_version(journal), rows(journal, "events", "seq")) == (0, old)


def test_a_new_file_is_created_at_this_version_without_a_backup(tmp_path: Path) -> None:
    from node_daemon.journal.event_journal import EventJournal

    journal = EventJournal(tmp_path / "journal.sqlite3")
    journal.close()
    assert user_version(tmp_path / "journal.sqlite3") == JOURNAL_SCHEMA.version
    assert not backup_path(tmp_path / "journal.sqlite3", JOURNAL_SCHEMA.version).exists()


def test_a_newer_file_is_refused_by_the_store_itself(tmp_path: Path) -> None:
    """`gpufleet usage import` and any other opener get the refusal too, not only the daemon."""
    from node_daemon.usage.store import UsageStore

    path = unpack(tmp_path) / "usage.sqlite3"
    stamp_version(path, 99)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(StateFileTooNew, match="usage store schema version 99"):
        UsageStore(path)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
    assert not path.with_name(path.name + "-wal").exists()
