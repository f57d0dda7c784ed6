"""Kill never hits a reused pid: the target is checked in a process list read at kill time.

PID reuse is forced for real: after the listed process exits, the test writes
its pid minus one to /proc/sys/kernel/ns_last_pid and starts root's own
process, which then gets the same pid (root only).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.backends.procinfo import process_start_time_unix_ms
from node_daemon.server import NodeDaemon
from tests.conftest import DaemonFactory, wait_for
from tests.pid_reuse import CAN_REUSE_PIDS, NO_PID_REUSE, spawn_with_pid

pytestmark = [
    pytest.mark.usefixtures("workload_accounts"),
    pytest.mark.skipif(not CAN_REUSE_PIDS, reason=NO_PID_REUSE),
]


@pytest.fixture
def node(start_daemon: DaemonFactory) -> Iterator[tuple[NodeDaemon, pb_grpc.NodeServiceStub]]:
    # Process lists are read every 3 s, as by default: the last sample goes stale for that long.
    daemon = start_daemon(gpus=2, model="h100", seed=2, process_interval_s=3.0)
    wait_for(lambda: daemon.sampler.latest is not None)
    with grpc.insecure_channel(str(daemon.address)) as channel:
        yield daemon, pb_grpc.NodeServiceStub(channel)


def listed(daemon: NodeDaemon, gpu: int, user: str) -> list:
    latest = daemon.sampler.latest
    return [p for p in (latest.processes.get(gpu, ()) if latest else ()) if p.user == user]


def alices_process_on_gpu(daemon: NodeDaemon, stub: pb_grpc.NodeServiceStub, gpu: int) -> int:
    queued = stub.SubmitWorkload(
        pb.SubmitWorkloadRequest(argv=["sleep", "300"], owner="alice", gpu_count=1), timeout=5
    )
    stub.AssignWorkload(pb.AssignWorkloadRequest(workload_id=queued.id, gpu_indices=[gpu]),
                        timeout=5)  # fmt: skip
    wait_for(lambda: listed(daemon, gpu, "alice"), 15, "alice's process in the sample")
    return int(listed(daemon, gpu, "alice")[0].pid)


def test_a_reused_pid_is_not_killed(node) -> None:
    daemon, stub = node
    pid = alices_process_on_gpu(daemon, stub, gpu=1)
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not Path(f"/proc/{pid}").exists(), 10, "alice's process to be reaped")
    stranger = spawn_with_pid(pid)
    try:
        assert listed(daemon, 1, "alice"), "the sample should still list the old process"
        # The caller names the pid with the new process's own start time, as /proc shows it.
        start = process_start_time_unix_ms(pid)
        assert start is not None
        with pytest.raises(grpc.RpcError) as refused:
            stub.KillProcess(
                pb.KillProcessRequest(
                    gpu_index=1, pid=pid, start_time_unix_ms=start, grace_s=1, actor="alice"
                ),
                timeout=30,
            )
        assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        # Not listed any more, or listed with the old process's start time (the simulator
        # drops it a tick later): either way refused before anything is signalled.
        details = refused.value.details()
        assert f"pid {pid} is not on GPU 1" in details or "a different process now" in details
        assert "nothing was signalled" in details
        assert stranger.poll() is None, "root's process on no GPU was signalled"
        kills = [
            e for e in daemon.journal.events_after(0) if e.kind == pb.EVENT_KIND_PROCESS_KILLED
        ]
        assert kills == []
    finally:
        stranger.kill()
        stranger.wait()


def test_a_start_time_other_than_the_listed_one_is_refused(node) -> None:
    daemon, stub = node
    pid = alices_process_on_gpu(daemon, stub, gpu=0)
    listed_start = listed(daemon, 0, "alice")[0].start_time_unix_ms
    for wrong in (0, listed_start - 60_000):
        with pytest.raises(grpc.RpcError) as refused:
            stub.KillProcess(
                pb.KillProcessRequest(gpu_index=0, pid=pid, start_time_unix_ms=wrong, grace_s=1),
                timeout=30,
            )
        assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "nothing was signalled" in refused.value.details()
    assert process_start_time_unix_ms(pid) == pytest.approx(listed_start, abs=20)  # alive


def test_the_journal_names_the_process_signalled(node) -> None:
    daemon, stub = node
    pid = alices_process_on_gpu(daemon, stub, gpu=0)
    start = listed(daemon, 0, "alice")[0].start_time_unix_ms
    reply = stub.KillProcess(
        pb.KillProcessRequest(
            gpu_index=0, pid=pid, start_time_unix_ms=start, grace_s=5, actor="erin"
        ),
        timeout=30,
    )
    assert reply.outcome == pb.KILL_OUTCOME_TERMINATED
    events = daemon.journal.events_after(0)
    (event,) = [e for e in events if e.kind == pb.EVENT_KIND_PROCESS_KILLED]
    assert f"pid {pid} (alice: sleep 300, started " in event.summary and "on GPU 0" in event.summary
