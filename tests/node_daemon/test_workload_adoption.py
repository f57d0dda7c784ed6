"""A restarted daemon adopts its running workloads by process identity, not by the wall clock.

A workload's record holds its pid and start time in Unix milliseconds; the
kernel derives those from the wall clock (/proc/stat's btime), which a clock
step moves by whole seconds between two daemons. What a restart compares is the
process's boot id and start tick, kept in the workload's directory at launch.
The daemons here are real (in-process, on loopback), the workloads real
processes, and a reused pid is forced for real through ns_last_pid.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import grpc
import pytest

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.backends.procinfo import (
    ProcessIdentity,
    boot_time_unix_s,
    process_identity,
    process_start_time_unix_ms,
)
from node_daemon.control.launcher import Launched, WorkloadFiles
from node_daemon.control.workloads import KIND
from node_daemon.journal.event_journal import EventJournal, StoredRecord
from node_daemon.server import NodeDaemon
from tests.conftest import DaemonFactory, wait_for
from tests.pid_reuse import CAN_REUSE_PIDS, NO_PID_REUSE, group_gone, spawn_with_pid

pytestmark = pytest.mark.usefixtures("workload_accounts")


def running_sleeper(daemon: NodeDaemon) -> pb.Workload:
    with grpc.insecure_channel(str(daemon.address)) as channel:
        stub = pb_grpc.NodeServiceStub(channel)
        request = pb.SubmitWorkloadRequest(argv=["sleep", "300"], owner="alice", gpu_count=1)
        queued = stub.SubmitWorkload(request, timeout=5)
        assign = pb.AssignWorkloadRequest(workload_id=queued.id, gpu_indices=[1])
        return stub.AssignWorkload(assign, timeout=10)


def listed(daemon: NodeDaemon, workload_id: str) -> pb.Workload:
    with grpc.insecure_channel(str(daemon.address)) as channel:
        stub = pb_grpc.NodeServiceStub(channel)
        reply = stub.ListWorkloads(pb.ListWorkloadsRequest(include_ended=True), timeout=5)
    return next(w for w in reply.workloads if w.id == workload_id)


def cancel(daemon: NodeDaemon, workload_id: str) -> None:
    with grpc.insecure_channel(str(daemon.address)) as channel:
        stub = pb_grpc.NodeServiceStub(channel)
        stub.CancelWorkload(pb.CancelWorkloadRequest(workload_id=workload_id), timeout=5)


def shift_recorded_start(state: Path, workload_id: str, by_ms: int) -> None:
    """The stored record as a daemon whose btime read `by_ms` differently would have made it."""
    journal = EventJournal(state / "journal.sqlite3")
    try:
        (stored,) = [
            w for w in map(pb.Workload.FromString, journal.records(KIND, active_only=True))
            if w.id == workload_id
        ]  # fmt: skip
        stored.pid_start_unix_ms += by_ms
        journal.record([], records=[StoredRecord(KIND, workload_id, True, 1,
                                                 stored.SerializeToString())])  # fmt: skip
    finally:
        journal.close()


def left_running(start_daemon: DaemonFactory, state: Path, identity_kept: bool) -> pb.Workload:
    """A workload running with no daemon watching it; without its identity file, as a
    daemon from before identities were kept (an upgrade) would have left it."""
    first = start_daemon(gpus=2, state_dir=state)
    running = running_sleeper(first)
    first.stop(grace_s=0.5)  # an in-process daemon leaves its workloads running
    if not identity_kept:
        identity_file(state, running.id).unlink()
    return running


@pytest.mark.parametrize("identity_kept", [True, False], ids=["kept", "record-from-before"])
@pytest.mark.parametrize("step_ms", [1000, -1000, 3_600_000])
def test_a_clock_step_between_two_daemons_leaves_the_workload_adopted(
    start_daemon: DaemonFactory, tmp_path: Path, step_ms: int, identity_kept: bool
) -> None:
    state = tmp_path / "state"
    running = left_running(start_daemon, state, identity_kept)
    shift_recorded_start(state, running.id, step_ms)
    again = start_daemon(gpus=2, state_dir=state)
    adopted = listed(again, running.id)
    assert adopted.state == pb.WORKLOAD_STATE_RUNNING, adopted.detail
    assert adopted.pid == running.pid
    # A record from before is known by its runner's argv, and its identity kept from now on.
    kept = WorkloadFiles(state / "workloads", running.id).kept_identity()
    assert kept is not None and kept == process_identity(running.pid)
    cancel(again, running.id)
    wait_for(lambda: reaped(running.pid), 15, "the cancelled runner to end")
    wait_for(lambda: listed(again, running.id).state == pb.WORKLOAD_STATE_CANCELLED, 15)


def identity_file(state: Path, workload_id: str) -> Path:
    return WorkloadFiles(state / "workloads", workload_id).identity


def reaped(pid: int) -> bool:
    """The runner is this test process's child (the first daemon ran in it): reap it."""
    return os.waitpid(pid, os.WNOHANG)[0] == pid


@pytest.mark.skipif(not CAN_REUSE_PIDS, reason=NO_PID_REUSE)
@pytest.mark.parametrize("identity_kept", [True, False], ids=["kept", "record-from-before"])
def test_a_process_that_reuses_the_pid_is_neither_adopted_nor_signalled(
    start_daemon: DaemonFactory, tmp_path: Path, identity_kept: bool
) -> None:
    state = tmp_path / "state"
    running = left_running(start_daemon, state, identity_kept)
    os.killpg(running.pid, signal.SIGKILL)  # the workload dies while no daemon watches
    os.waitpid(running.pid, 0)  # this process started it: reap it, so its pid is free
    # The pid is free only once its group is gone too: the workload's own process, its
    # member, is reaped by init, which may take a while.
    wait_for(lambda: group_gone(running.pid), 15, "the killed workload's group to be reaped")
    stranger = spawn_with_pid(running.pid, new_session=True)
    try:
        # Even a start time that matches to the millisecond would not make it the workload.
        shift_recorded_start(
            state, running.id, (process_start_time_unix_ms(stranger.pid) or 0)
            - running.pid_start_unix_ms,
        )  # fmt: skip
        again = start_daemon(gpus=2, state_dir=state)
        ended = listed(again, running.id)
        assert ended.state == pb.WORKLOAD_STATE_FAILED
        assert "ended while the daemon was down" in ended.detail
        assert stranger.poll() is None, "the process that reused the pid was signalled"
    finally:
        stranger.kill()
        stranger.wait()


# -- the identity itself, on a recorded /proc --------------------------------------------


def fake_proc(root: Path, pid: int, start_ticks: int, btime: int, boot: str) -> Path:
    (root / str(pid)).mkdir(parents=True, exist_ok=True)
    fields = ["S"] + ["0"] * 18 + [str(start_ticks)] + ["0"] * 10
    (root / str(pid) / "stat").write_text(f"{pid} (sleep) {' '.join(fields)}\n")
    (root / "stat").write_text(f"cpu  1 2 3 4\nbtime {btime}\n")
    (root / "sys" / "kernel" / "random").mkdir(parents=True, exist_ok=True)
    (root / "sys" / "kernel" / "random" / "boot_id").write_text(boot + "\n")
    return root


def test_identity_decides_and_the_wall_clock_does_not(tmp_path: Path) -> None:
    root = fake_proc(tmp_path, 4242, start_ticks=5000, btime=1_800_000_000, boot="b-1")
    identity = process_identity(4242, root)
    assert identity == ProcessIdentity("b-1", 5000)
    recorded_ms = process_start_time_unix_ms(4242, root)
    assert recorded_ms is not None
    off_by_a_second = Launched(4242, recorded_ms - 1000, identity=identity)
    assert off_by_a_second.is_running(root)
    assert not Launched(4242, recorded_ms, identity=ProcessIdentity("b-1", 5001)).is_running(root)
    assert not Launched(4242, recorded_ms, identity=ProcessIdentity("b-0", 5000)).is_running(root)
    # A record from before identities were kept: its start time, to a clock tick.
    assert Launched(4242, recorded_ms + 10).is_running(root)
    assert not Launched(4242, recorded_ms - 1000).is_running(root)
    assert not Launched(1, recorded_ms, identity=identity).is_running(root)


def test_start_times_use_the_boot_time_first_read(tmp_path: Path) -> None:
    root = fake_proc(tmp_path, 4242, start_ticks=5000, btime=1_800_000_000, boot="b-1")
    before = process_start_time_unix_ms(4242, root)
    fake_proc(root, 4242, start_ticks=5000, btime=1_800_000_001, boot="b-1")  # a clock step
    assert boot_time_unix_s(root) == 1_800_000_000
    assert process_start_time_unix_ms(4242, root) == before


def test_the_identity_is_kept_next_to_the_workload(tmp_path: Path) -> None:
    files = WorkloadFiles(tmp_path, "w-7")
    files.prepare()
    assert files.kept_identity() is None
    files.keep_identity(ProcessIdentity("b-1", 5000))
    assert files.kept_identity() == ProcessIdentity("b-1", 5000)
    files.identity.write_text("garbage\n")
    assert files.kept_identity() is None
