"""An audit log cut short is found: the head is anchored in the journal, the log and /metrics.

Real daemon processes (tests/daemon_process.py), real SQLite files, and the real
`gpufleet audit verify` command line.
"""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.auth.audit import entry_hash
from tests.conftest import DaemonFactory, wait_for
from tests.daemon_process import DaemonProcess

HEAD_LINE = re.compile(r"audit head: record (\d+), hash ([0-9a-f]{64})")


def audit_verify(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "node_daemon", "audit", "verify", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


def make_changes(address: str, count: int) -> None:
    """Reserve and release GPU 0 (two audited calls each, attempt and result)."""
    until = int((time.time() + 3600) * 1000)
    with grpc.insecure_channel(address) as channel:
        stub = pb_grpc.NodeServiceStub(channel)
        for _ in range(count):
            made = stub.Reserve(
                pb.ReserveRequest(gpu_indices=[0], holder="alice", until_unix_ms=until), timeout=5
            )
            stub.ReleaseReservation(pb.ReleaseReservationRequest(reservation_id=made.id), timeout=5)


def audit_seqs(state: Path) -> list[int]:
    with sqlite3.connect(state / "audit.sqlite3") as db:
        return [seq for (seq,) in db.execute("SELECT seq FROM audit ORDER BY seq")]


def cut(state: Path, after: int) -> None:
    """What someone who can write the file does to hide the newest records."""
    with sqlite3.connect(state / "audit.sqlite3") as db:
        db.execute("DELETE FROM audit WHERE seq > ?", (after,))


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[DaemonProcess]:
    process = DaemonProcess(tmp_path, "--backend", "simulated", "--gpus", "1").start()
    yield process
    process.stop()


def test_a_cut_tail_is_reported_and_stays_reported_after_a_restart(
    daemon: DaemonProcess,
) -> None:
    state = daemon.workdir / "state"
    make_changes(daemon.address, 3)  # records 1..12
    daemon.stop()
    assert audit_seqs(state) == list(range(1, 13))
    cut(state, after=8)

    result = audit_verify("--state-dir", str(state))
    assert result.returncode == 1, result.stdout
    assert "TAMPERED: record 9..12 deleted from the end" in result.stdout, result.stdout

    # The restarted daemon says so, and numbers on after the anchored head, so the
    # gap stays in the chain even once its new records move the anchor on.
    daemon.start()
    make_changes(daemon.address, 1)
    daemon.stop()
    assert audit_seqs(state) == [*range(1, 9), 13, 14, 15, 16]
    assert "its newest records were deleted" in daemon.log.read_text()
    result = audit_verify("--state-dir", str(state))
    assert result.returncode == 1, result.stdout
    assert "TAMPERED: record 9..12 deleted (the chain jumps to 13)" in result.stdout


def test_a_copy_is_checked_against_a_head_from_the_daemons_log(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    make_changes(daemon.address, 1)
    daemon.stop()  # the head is logged at stop: under systemd the journal keeps the line
    heads = HEAD_LINE.findall(daemon.log.read_text())
    assert heads, daemon.log.read_text()
    seq, digest = heads[-1]
    assert seq == "4"
    state = daemon.workdir / "state"
    copy = tmp_path / "copy.sqlite3"
    with sqlite3.connect(state / "audit.sqlite3") as db:
        db.execute(f"VACUUM INTO '{copy}'")
    ok = audit_verify("--file", str(copy), "--head", f"{seq}:{digest}")
    assert ok.returncode == 0 and "reaches every anchored head" in ok.stdout, ok.stdout
    with sqlite3.connect(copy) as db:
        db.execute("DELETE FROM audit WHERE seq = 4")
    cut_copy = audit_verify("--file", str(copy), "--head", f"{seq}:{digest}")
    assert cut_copy.returncode == 1
    assert "TAMPERED: record 4 deleted from the end" in cut_copy.stdout, cut_copy.stdout


def test_a_rewritten_newest_record_does_not_match_its_anchor(daemon: DaemonProcess) -> None:
    make_changes(daemon.address, 1)
    daemon.stop()
    state = daemon.workdir / "state"
    # A consistent rewrite of the newest record: its hash recomputed, so the chain holds.
    with sqlite3.connect(state / "audit.sqlite3") as db:
        row = db.execute(
            "SELECT seq, time_ms, user, peer, method, target, params, result, prev_hash "
            "FROM audit ORDER BY seq DESC LIMIT 1"
        ).fetchone()
        forged = entry_hash(*row[:2], "mallory", *row[3:])
        db.execute("UPDATE audit SET user = 'mallory', hash = ? WHERE seq = ?", (forged, row[0]))
    result = audit_verify("--state-dir", str(state))
    assert result.returncode == 1
    assert f"TAMPERED: record {row[0]} is not the record once seen there" in result.stdout


def test_audit_verify_on_a_file_that_is_no_audit_log(tmp_path: Path) -> None:
    other = tmp_path / "journal.sqlite3"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE events (seq INTEGER)")
    result = audit_verify("--file", str(other))
    assert result.returncode == 2
    assert "has no audit table" in result.stderr and "Traceback" not in result.stderr
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n" * 200)
    result = audit_verify("--file", str(text))
    assert result.returncode == 2
    assert "is not an SQLite audit log" in result.stderr and "Traceback" not in result.stderr


def test_metrics_and_the_journal_carry_the_audit_head(start_daemon: DaemonFactory) -> None:
    node = start_daemon(gpus=1, metrics_listen="127.0.0.1:0")
    make_changes(str(node.address), 2)
    head = node.audit.head
    assert head[0] == 8 and node.journal.audit_head == head
    assert node.metrics is not None
    url = f"http://127.0.0.1:{node.metrics.server.port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    assert "gpufleet_audit_records_total 8.0" in text, text
    assert "gpufleet_journal_writable 1.0" in text


def test_the_log_says_the_head_at_start(daemon: DaemonProcess) -> None:
    make_changes(daemon.address, 1)
    daemon.stop()
    daemon.log.write_text("")
    daemon.start()
    wait_for(lambda: HEAD_LINE.search(daemon.log.read_text()), what="the head logged at start")
    assert HEAD_LINE.search(daemon.log.read_text()).group(1) == "4"  # type: ignore[union-attr]
