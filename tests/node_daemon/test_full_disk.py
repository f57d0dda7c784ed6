"""A full state disk: the daemon starts degraded, serves reads, refuses changes, recovers.

The state directory is a small tmpfs filled to the last byte (root only: the
tests are skipped elsewhere); the daemon is a real process.
"""

from __future__ import annotations

import errno
import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from tests.conftest import wait_for
from tests.daemon_process import DaemonProcess
from tests.node_daemon.journal import events_after

DISK_MB = 16
CHUNK = 1024 * 1024


class SmallDisk:
    """A tmpfs of DISK_MB MiB at `path` that can be filled up and emptied again."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.filler = path / "filler"

    def fill(self) -> None:
        """Write until the file system has not one byte left."""
        with open(self.filler, "ab", buffering=0) as out:
            for size in (CHUNK, 4096, 1):
                try:
                    while True:
                        out.write(b"\0" * size)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC, exc
        stats = os.statvfs(self.path)
        assert stats.f_bavail == 0, stats

    def free(self) -> None:
        self.filler.unlink()


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[SmallDisk]:
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    state = tmp_path / "state"
    state.mkdir()
    mount = ["mount", "-t", "tmpfs", "-o", f"size={DISK_MB}m", "tmpfs", str(state)]
    done = subprocess.run(mount, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {done.stderr.strip()}")
    yield SmallDisk(state)
    subprocess.run(["umount", "-l", str(state)], check=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def in_an_hour() -> int:
    return int((time.time() + 3600) * 1000)


def alerts(stub: pb_grpc.NodeServiceStub) -> list[pb.Alert]:
    return list(stub.ListAlerts(pb.ListAlertsRequest(), timeout=5).alerts)


def state_alert(stub: pb_grpc.NodeServiceStub) -> pb.Alert | None:
    return next((a for a in alerts(stub) if a.rule == "state_disk"), None)


def assert_in_time_order(events: list[pb.Event]) -> None:
    seqs = [e.seq for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), seqs
    times = [(e.seq, e.time_unix_ms, pb.EventKind.Name(e.kind)) for e in events]
    assert [t for _, t, _ in times] == sorted(t for _, t, _ in times), times


def reserve(stub: pb_grpc.NodeServiceStub, gpu: int, until_ms: int) -> pb.Reservation:
    request = pb.ReserveRequest(gpu_indices=[gpu], holder="alice", until_unix_ms=until_ms)
    return stub.Reserve(request, timeout=5)


def refused(call: object) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as info:
        call()  # type: ignore[operator]
    return info.value


def can_reserve(stub: pb_grpc.NodeServiceStub, gpu: int) -> bool:
    try:
        reserve(stub, gpu, in_an_hour())
    except grpc.RpcError as exc:
        assert exc.code() == grpc.StatusCode.UNAVAILABLE, exc
        return False
    return True


@pytest.mark.parametrize("history", ["fresh", "existing"])
def test_a_daemon_on_a_full_disk_serves_reads_refuses_changes_and_recovers(
    disk: SmallDisk, tmp_path: Path, history: str
) -> None:
    metrics = free_port()
    daemon = DaemonProcess(tmp_path, "--backend", "simulated", "--gpus", "2", "--interval",
                           "0.1", "--metrics-listen", f"127.0.0.1:{metrics}")  # fmt: skip
    before: pb.Reservation | None = None
    if history == "existing":
        daemon.start()
        with grpc.insecure_channel(daemon.address) as channel:
            before = reserve(pb_grpc.NodeServiceStub(channel), 0, in_an_hour())
        daemon.stop()
    disk.fill()
    try:
        daemon.start()  # asserts that it serves and did not exit
        with grpc.insecure_channel(daemon.address) as channel:
            stub = pb_grpc.NodeServiceStub(channel)
            check_degraded(daemon, stub, before, metrics)
            disk.free()
            # Recovers without a restart: the first change that finds room goes through.
            wait_for(lambda: can_reserve(stub, 1), 15, "a change to work again")
            wait_for(lambda: state_alert(stub) is None, 15, "the state disk alert to clear")
            events = events_after(stub)
    finally:
        daemon.stop()
    assert_in_time_order(events)
    kinds = [e.kind for e in events]
    assert kinds.count(pb.EVENT_KIND_DAEMON_STARTED) == (2 if before else 1)
    raised = [e for e in events if e.alert.rule == "state_disk"]
    assert [e.kind for e in raised] == [pb.EVENT_KIND_ALERT_RAISED, pb.EVENT_KIND_ALERT_CLEARED]
    assert len({e.journal_id for e in events}) == 1


def check_degraded(
    daemon: DaemonProcess, stub: pb_grpc.NodeServiceStub, before: pb.Reservation | None,
    metrics: int,
) -> None:  # fmt: skip
    log = daemon.log.read_text()
    assert "state disk full" in log and "refusing changes" in log, log
    assert len(stub.GetInventory(pb.GetInventoryRequest(), timeout=5).gpus) == 2
    stream = stub.StreamSamples(pb.StreamSamplesRequest(), timeout=10)
    assert len(next(stream).gpus) == 2
    stream.cancel()
    wait_for(lambda: state_alert(stub) is not None, 15, "a state disk alert")
    alert = state_alert(stub)
    assert alert is not None and alert.severity == pb.SEVERITY_CRITICAL
    assert "state disk full" in alert.summary, alert.summary
    held = stub.ListReservations(pb.ListReservationsRequest(), timeout=5).reservations
    assert [r.id for r in held] == ([before.id] if before else [])
    stub.QueryUsage(pb.QueryUsageRequest(), timeout=5)
    # A past moment is a read too (GetStateAt): answered from what the full disk holds.
    now_ms = int(time.time() * 1000)
    moment = stub.GetStateAt(pb.GetStateAtRequest(at_unix_ms=now_ms), timeout=5)
    assert sorted(g.index for g in moment.gpus) == [0, 1]
    assert [r.id for r in moment.reservations] == ([before.id] if before else [])
    # So is a range of the journal's events (ListEvents): answered from what it stored
    # before the disk filled (nothing where it started full), as the listing's journal.
    listed = stub.ListEvents(pb.ListEventsRequest(since_unix_ms=now_ms - 3_600_000), timeout=5)
    journal_id = stub.ListAlerts(pb.ListAlertsRequest(), timeout=5).journal_id
    assert listed.journal_id == journal_id and all(e.replayed for e in listed.events), listed
    for change in (
        lambda: reserve(stub, 1, in_an_hour()),
        lambda: stub.AcknowledgeAlert(pb.AcknowledgeAlertRequest(alert_id=alert.id), timeout=5),
    ):
        error = refused(change)
        assert error.code() == grpc.StatusCode.UNAVAILABLE, error
        assert "state disk full:" in error.details(), error.details()
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=5) as response:
        text = response.read().decode()
    assert "gpufleet_journal_writable 0.0" in text


SCENARIO = """
[[event]]
at = {at}
gpu = 0
kind = "lost"
"""


def test_events_of_a_full_disk_spell_keep_their_time_order(disk: SmallDisk, tmp_path: Path) -> None:
    """Alert events made while the disk is full are written before anything newer.

    A reservation that expires during the spell is written on the first tick after
    it (the reservations step runs before the alert rules): it must not get a lower
    seq than the GPU-lost events the alert rules made earlier, during the spell.
    """
    lost_at_s = 6
    (tmp_path / "scenario.toml").write_text(SCENARIO.format(at=lost_at_s), encoding="utf-8")
    daemon = DaemonProcess(tmp_path, "--backend", "simulated", "--gpus", "2", "--interval",
                           "0.1", "--scenario", str(tmp_path / "scenario.toml"))  # fmt: skip
    started = time.monotonic()
    daemon.start()
    try:
        with grpc.insecure_channel(daemon.address) as channel:
            stub = pb_grpc.NodeServiceStub(channel)
            reserve(stub, 1, int((time.time() + 1.0) * 1000))
            disk.fill()
            assert time.monotonic() - started < lost_at_s, "too slow: GPU 0 was lost already"
            wait_for(lambda: any(a.rule == "gpu_lost" for a in alerts(stub)), 30, "GPU 0 lost")
            disk.free()
            wait_for(
                lambda: pb.EVENT_KIND_RESERVATION_EXPIRED in [e.kind for e in events_after(stub)],
                15, "the expiry to be written",
            )  # fmt: skip
            events = events_after(stub)
    finally:
        daemon.stop()
    assert pb.EVENT_KIND_GPU_LOST in [e.kind for e in events]
    assert_in_time_order(events)
