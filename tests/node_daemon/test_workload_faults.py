"""Workloads on a full state disk and across a crash mid-start: told is stored, nothing extra runs.

The state directory lives on a real, small tmpfs that the test fills up; the
daemon's stores then refuse writes as they would on a full disk. Over gRPC the
audit log (same disk) refuses first; the workload manager's own tests put only
its journal on the small disk, so that the journal is what refuses, as on a
disk that still had room for the audit record.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from gpufleet.states import WorkloadState
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.backends.procinfo import process_start_time_unix_ms
from node_daemon.backends.readings import GpuReading, GpuStatic
from node_daemon.control.launcher import LaunchSpec, WorkloadFiles, find_runner, launch
from node_daemon.control.records import Workload, WorkloadRequest
from node_daemon.control.reservations import ReservationLedger
from node_daemon.control.workloads import KIND, LAUNCH_KIND, NodeView, WorkloadManager
from node_daemon.journal.event_journal import EventJournal, JournalError, StoredRecord
from node_daemon.server import NodeDaemon
from tests.conftest import DaemonFactory, wait_for
from tests.small_disk import SmallDisk, small_disk

pytestmark = pytest.mark.usefixtures("workload_accounts")


@pytest.fixture
def disk() -> Iterator[SmallDisk]:
    with small_disk() as mounted:
        yield mounted


def stub_of(daemon: NodeDaemon) -> tuple[grpc.Channel, pb_grpc.NodeServiceStub]:
    channel = grpc.insecure_channel(str(daemon.address))
    return channel, pb_grpc.NodeServiceStub(channel)


def listed(stub: pb_grpc.NodeServiceStub, workload_id: str) -> pb.Workload:
    reply = stub.ListWorkloads(pb.ListWorkloadsRequest(include_ended=True), timeout=5)
    return next(w for w in reply.workloads if w.id == workload_id)


def queue_sleeper(stub: pb_grpc.NodeServiceStub) -> pb.Workload:
    request = pb.SubmitWorkloadRequest(argv=["sleep", "300"], owner="alice", gpu_count=1)
    return stub.SubmitWorkload(request, timeout=5)


def test_cancel_on_a_full_disk_changes_nothing_and_never_signals_the_daemon(
    start_daemon: DaemonFactory, disk: SmallDisk
) -> None:
    daemon = start_daemon(gpus=2, state_dir=disk.path / "state")
    channel, stub = stub_of(daemon)
    with channel:
        queued = queue_sleeper(stub)
        disk.fill()
        for _ in range(2):  # the second cancel used to killpg(0): the daemon's own group
            with pytest.raises(grpc.RpcError) as refused:
                stub.CancelWorkload(pb.CancelWorkloadRequest(workload_id=queued.id), timeout=5)
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
            assert "disk full" in refused.value.details()
            assert listed(stub, queued.id).state == pb.WORKLOAD_STATE_QUEUED  # as it was told
        disk.free()
        cancelled = stub.CancelWorkload(pb.CancelWorkloadRequest(workload_id=queued.id), timeout=5)
        assert cancelled.state == pb.WORKLOAD_STATE_CANCELLED
        assert listed(stub, queued.id).state == pb.WORKLOAD_STATE_CANCELLED
    stored = [pb.Workload.FromString(b) for b in daemon.journal.records(KIND, active_only=False)]
    assert [w.state for w in stored if w.id == queued.id] == [pb.WORKLOAD_STATE_CANCELLED]


def test_assign_on_a_full_disk_starts_nothing_and_a_restart_starts_one_copy(
    start_daemon: DaemonFactory, disk: SmallDisk
) -> None:
    state = disk.path / "state"
    daemon = start_daemon(gpus=2, state_dir=state)
    channel, stub = stub_of(daemon)
    with channel:
        queued = queue_sleeper(stub)
        disk.fill()
        for _ in range(3):
            with pytest.raises(grpc.RpcError) as refused:
                stub.AssignWorkload(
                    pb.AssignWorkloadRequest(workload_id=queued.id, gpu_indices=[1]), timeout=10
                )
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
            assert listed(stub, queued.id).state == pb.WORKLOAD_STATE_QUEUED
        files = WorkloadFiles(state / "workloads", queued.id)
        assert find_runner(files) is None, "a refused assign left its workload running"
        disk.free()
    daemon.stop(grace_s=0.5)
    again = start_daemon(gpus=2, state_dir=state)
    channel, stub = stub_of(again)
    with channel:
        assert listed(stub, queued.id).state == pb.WORKLOAD_STATE_QUEUED
        running = stub.AssignWorkload(
            pb.AssignWorkloadRequest(workload_id=queued.id, gpu_indices=[1]), timeout=10
        )
        assert running.state == pb.WORKLOAD_STATE_RUNNING
        assert find_runner(files) == running.pid
        stub.CancelWorkload(pb.CancelWorkloadRequest(workload_id=queued.id), timeout=5)
        wait_for(lambda: find_runner(files) is None, 15, "the cancelled workload to end")


def crash_mid_start(daemon: NodeDaemon, state: Path, with_runner: bool):  # type: ignore[no-untyped-def]
    """Leave the journal as a daemon killed between its launch intent and its commit."""
    channel, stub = stub_of(daemon)
    with channel:
        queued = queue_sleeper(stub)
    daemon.stop(grace_s=0.5)
    intended = pb.Workload()
    intended.CopyFrom(queued)
    intended.state = pb.WORKLOAD_STATE_RUNNING
    intended.gpu_indices[:] = [0]
    journal = EventJournal(state / "journal.sqlite3")
    journal.record([], records=[StoredRecord(LAUNCH_KIND, queued.id, True, 1,
                                             intended.SerializeToString())])  # fmt: skip
    journal.close()
    runner = None
    if with_runner:
        files = WorkloadFiles(state / "workloads", queued.id)
        spec = LaunchSpec(["sleep", "300"], {"PATH": "/usr/bin:/bin"}, "alice", None)
        runner = launch(files, spec)
    return queued, runner


def test_a_crash_after_launch_is_adopted_not_started_twice(
    start_daemon: DaemonFactory, tmp_path
) -> None:
    state = tmp_path / "state"
    queued, runner = crash_mid_start(start_daemon(gpus=2, state_dir=state), state, True)
    again = start_daemon(gpus=2, state_dir=state)
    channel, stub = stub_of(again)
    with channel:
        adopted = listed(stub, queued.id)
        assert adopted.state == pb.WORKLOAD_STATE_RUNNING and adopted.pid == runner.pid
        assert list(adopted.gpu_indices) == [0]
        with pytest.raises(grpc.RpcError) as refused:
            stub.AssignWorkload(
                pb.AssignWorkloadRequest(workload_id=queued.id, gpu_indices=[1]), timeout=10
            )
        assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        stub.CancelWorkload(pb.CancelWorkloadRequest(workload_id=queued.id), timeout=5)
        runner.popen.wait(15)  # the test started it: its child to reap
        assert process_start_time_unix_ms(runner.pid) is None


def test_a_crash_before_launch_leaves_it_queued(start_daemon: DaemonFactory, tmp_path) -> None:
    state = tmp_path / "state"
    queued, _ = crash_mid_start(start_daemon(gpus=2, state_dir=state), state, False)
    again = start_daemon(gpus=2, state_dir=state)
    channel, stub = stub_of(again)
    with channel:
        assert listed(stub, queued.id).state == pb.WORKLOAD_STATE_QUEUED
    assert again.journal.records(LAUNCH_KIND, active_only=True) == []


def test_signal_group_never_signals_the_daemon_or_init() -> None:
    from node_daemon.control.launcher import TERM, signal_group

    for pid in (0, 1, os.getpgrp()):
        with pytest.raises(ValueError, match="refusing to signal"):
            signal_group(pid, TERM)


# -- the workload manager with only its journal on the full disk ------------------------


@pytest.fixture
def manager(disk: SmallDisk, tmp_path: Path) -> Iterator[WorkloadManager]:
    journal = EventJournal(disk.path / "journal.sqlite3")
    gpus = {i: GpuStatic(index=i, uuid=f"GPU-{i:08d}", name="Test GPU") for i in range(2)}
    readings = [GpuReading(index=i) for i in range(2)]
    ledger = ReservationLedger(journal, lambda: 2)
    yield WorkloadManager(journal, tmp_path / "workloads", ledger,
                          lambda: NodeView(readings, gpus))  # fmt: skip
    journal.close()


def queued_in(manager: WorkloadManager) -> Workload:
    request = WorkloadRequest(argv=("sleep", "300"), owner="alice", gpu_count=1)
    return manager.submit(request, "alice")


def test_a_refused_cancel_leaves_the_workload_queued_in_memory_too(
    manager: WorkloadManager, disk: SmallDisk
) -> None:
    queued = queued_in(manager)
    disk.fill()
    for _ in range(2):
        with pytest.raises(JournalError):
            manager.cancel(queued.id, "alice")
        assert manager.get(queued.id).state is WorkloadState.QUEUED
    disk.free()
    assert manager.cancel(queued.id, "alice").state is WorkloadState.CANCELLED


def test_a_refused_assign_runs_nothing(manager: WorkloadManager, disk: SmallDisk) -> None:
    queued = queued_in(manager)
    disk.fill()
    with pytest.raises(JournalError):
        manager.assign(queued.id, [0], "alice")
    assert manager.get(queued.id).state is WorkloadState.QUEUED
    assert find_runner(WorkloadFiles(manager._root, queued.id)) is None


def test_a_commit_refused_after_launch_kills_what_it_started(
    manager: WorkloadManager, disk: SmallDisk, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fault injection: the disk fills between the launch intent and the commit."""
    queued = queued_in(manager)
    started: list[int] = []
    real_launch = manager.launcher.launch

    def launch_then_fill(files: WorkloadFiles, spec: LaunchSpec):  # type: ignore[no-untyped-def]
        launched = real_launch(files, spec)
        started.append(launched.pid)
        disk.fill()
        return launched

    monkeypatch.setattr(manager.launcher, "launch", launch_then_fill)
    with pytest.raises(JournalError):
        manager.assign(queued.id, [0], "alice")
    assert len(started) == 1 and process_start_time_unix_ms(started[0]) is None
    assert manager.get(queued.id).state is WorkloadState.QUEUED
