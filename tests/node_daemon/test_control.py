"""Kill, reservations and the workload queue over real gRPC, with real processes."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import grpc
import pytest

from gpufleet.policy import LOCAL_USER
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from gpufleet.v1.gpu_metrics import UTIL_GPU_PCT
from node_daemon.backends.procinfo import process_start_time_unix_ms
from node_daemon.control.kill import KillOutcome, PidReused, kill_process
from node_daemon.server import NodeDaemon
from tests.conftest import DaemonFactory, wait_for

# Workloads run as their owners' local accounts: the tests create them.
pytestmark = pytest.mark.usefixtures("workload_accounts")

# The shell's ignored TERM is inherited across exec: sleep ignores it too. (A plain
# system command: the workload runs as its owner, who may not reach this venv.)
IGNORES_TERM = ["sh", "-c", "trap '' TERM; exec sleep 300"]


@pytest.fixture
def node(start_daemon: DaemonFactory) -> Iterator[tuple[NodeDaemon, pb_grpc.NodeServiceStub]]:
    daemon = start_daemon(gpus=4, model="h100", seed=2)
    wait_for(lambda: daemon.sampler.latest is not None)
    with grpc.insecure_channel(str(daemon.address)) as channel:
        yield daemon, pb_grpc.NodeServiceStub(channel)


def submit(stub, argv, owner="alice", gpus=1, **extra) -> pb.Workload:  # type: ignore[no-untyped-def]
    request = pb.SubmitWorkloadRequest(argv=argv, owner=owner, gpu_count=gpus, **extra)
    return stub.SubmitWorkload(request, timeout=5)


def workload(stub, workload_id: str) -> pb.Workload:  # type: ignore[no-untyped-def]
    listed = stub.ListWorkloads(pb.ListWorkloadsRequest(include_ended=True), timeout=5).workloads
    return next(w for w in listed if w.id == workload_id)


def on_gpu(daemon: NodeDaemon, gpu: int, user: str) -> list:
    latest = daemon.sampler.latest
    return [p for p in (latest.processes.get(gpu, ()) if latest else ()) if p.user == user]


def run_on_gpu(daemon, stub, argv, gpu: int) -> pb.GpuProcess:  # type: ignore[no-untyped-def]
    """Start a real process as a workload on `gpu`; return it as the daemon lists it."""
    queued = submit(stub, argv, owner="worker")
    stub.AssignWorkload(
        pb.AssignWorkloadRequest(workload_id=queued.id, gpu_indices=[gpu]), timeout=5
    )
    wait_for(lambda: on_gpu(daemon, gpu, "worker"), 10, "the workload's process on the GPU")
    process = on_gpu(daemon, gpu, "worker")[0]
    return pb.GpuProcess(pid=process.pid, start_time_unix_ms=process.start_time_unix_ms or 0)


def has_exited(pid: int) -> bool:
    """Gone, or a zombie its parent (the workload's runner) has yet to reap.

    A kill reports success when the process exits, which is before the runner's
    waitpid removes it from /proc: under load the zombie is still there.
    """
    try:
        with open(f"/proc/{pid}/stat") as file:
            stat = file.read()
    except FileNotFoundError:
        return True
    return stat[stat.rindex(")") + 2 :].split()[0] in ("Z", "X")


def kill(stub, gpu: int, process: pb.GpuProcess, grace_s: int = 5, start=None):  # type: ignore[no-untyped-def]
    request = pb.KillProcessRequest(
        gpu_index=gpu, pid=process.pid, grace_s=grace_s,
        start_time_unix_ms=process.start_time_unix_ms if start is None else start,
    )  # fmt: skip
    return stub.KillProcess(request, timeout=30)


def test_kill_a_sleeper_on_a_gpu(node) -> None:
    daemon, stub = node
    process = run_on_gpu(daemon, stub, ["sleep", "300"], gpu=2)
    reply = kill(stub, 2, process)
    assert reply.outcome == pb.KILL_OUTCOME_TERMINATED and "sleep 300" in reply.detail
    assert has_exited(process.pid)  # really gone
    events = daemon.journal.events_after(0)
    assert any(e.kind == pb.EVENT_KIND_PROCESS_KILLED and e.actor == LOCAL_USER for e in events)


def test_a_process_ignoring_term_is_killed_after_the_grace(node) -> None:
    daemon, stub = node
    process = run_on_gpu(daemon, stub, IGNORES_TERM, gpu=1)
    started = time.monotonic()
    reply = kill(stub, 1, process, grace_s=1)
    assert reply.outcome == pb.KILL_OUTCOME_KILLED
    assert time.monotonic() - started >= 1.0  # it waited the grace before KILL
    assert has_exited(process.pid)


def test_wrong_start_time_is_refused_and_nothing_is_signalled(node) -> None:
    daemon, stub = node
    process = run_on_gpu(daemon, stub, ["sleep", "300"], gpu=0)
    with pytest.raises(grpc.RpcError) as info:
        kill(stub, 0, process, start=process.start_time_unix_ms - 60_000)
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "different process" in info.value.details()
    assert process_start_time_unix_ms(process.pid) is not None  # still alive


def test_a_pid_not_on_that_gpu_is_refused(node) -> None:
    daemon, stub = node
    process = run_on_gpu(daemon, stub, ["sleep", "300"], gpu=0)
    with pytest.raises(grpc.RpcError) as info:
        kill(stub, 3, process)
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert f"pid {process.pid} is not on GPU 3" in info.value.details()
    for pid in (0, 1):
        with pytest.raises(grpc.RpcError) as info:
            kill(stub, 0, pb.GpuProcess(pid=pid, start_time_unix_ms=0))
        assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_kill_primitive_already_gone_and_reuse() -> None:
    sleeper = subprocess.Popen(["sleep", "300"])
    started = process_start_time_unix_ms(sleeper.pid)
    assert started is not None
    with pytest.raises(PidReused):
        kill_process(sleeper.pid, started - 5000, grace_s=1)
    assert sleeper.poll() is None  # untouched
    assert kill_process(sleeper.pid, started, grace_s=5) is KillOutcome.TERMINATED
    sleeper.wait()
    assert kill_process(sleeper.pid, started, grace_s=1) is KillOutcome.ALREADY_GONE


def in_an_hour() -> int:
    return int((time.time() + 3600) * 1000)


def test_reservations_conflict_release_and_only_the_holder_may_use_them(node) -> None:
    _, stub = node
    request = pb.ReserveRequest(gpu_indices=[1, 2], holder="alice", until_unix_ms=in_an_hour(),
                                reason="paper deadline")  # fmt: skip
    held = stub.Reserve(request, timeout=5)
    assert held.active and list(held.gpu_indices) == [1, 2]
    with pytest.raises(grpc.RpcError) as info:
        bob = pb.ReserveRequest(gpu_indices=[2, 3], holder="bob", until_unix_ms=in_an_hour())
        stub.Reserve(bob, timeout=5)
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "GPU 2 is reserved for alice until" in info.value.details()
    assert "(paper deadline)" in info.value.details()
    bobs = submit(stub, ["sleep", "1"], owner="bob")
    with pytest.raises(grpc.RpcError) as info:
        stub.AssignWorkload(
            pb.AssignWorkloadRequest(workload_id=bobs.id, gpu_indices=[1]), timeout=5
        )
    assert "reserved for alice" in info.value.details()
    alices = submit(stub, ["sleep", "1"], owner="alice")
    started = stub.AssignWorkload(pb.AssignWorkloadRequest(workload_id=alices.id, gpu_indices=[1]),
                                  timeout=5)  # fmt: skip
    assert started.state == pb.WORKLOAD_STATE_RUNNING
    released = stub.ReleaseReservation(
        pb.ReleaseReservationRequest(reservation_id=held.id), timeout=5
    )
    assert not released.active and released.HasField("ended_unix_ms")
    assert stub.ListReservations(pb.ListReservationsRequest(), timeout=5).reservations == []


def test_reservation_expires_by_itself(node) -> None:
    daemon, stub = node
    until = int((time.time() + 0.5) * 1000)
    stub.Reserve(
        pb.ReserveRequest(gpu_indices=[0], holder="team:ml", until_unix_ms=until), timeout=5
    )
    wait_for(lambda: any(e.kind == pb.EVENT_KIND_RESERVATION_EXPIRED
                         for e in daemon.journal.events_after(0)), 10, "expiry")  # fmt: skip
    assert stub.ListReservations(pb.ListReservationsRequest(), timeout=5).reservations == []


@pytest.mark.parametrize(
    ("request_", "words"),
    [
        (pb.ReserveRequest(gpu_indices=[9], holder="a", until_unix_ms=2**40), "no GPU 9"),
        (pb.ReserveRequest(gpu_indices=[0], holder="a", until_unix_ms=1), "in the past"),
        (pb.ReserveRequest(gpu_indices=[0], holder=" ", until_unix_ms=2**40), "needs a holder"),
        (pb.ReserveRequest(gpu_indices=[], holder="a", until_unix_ms=2**40), "at least one GPU"),
    ],
)
def test_bad_reservations(node, request_, words) -> None:
    _, stub = node
    with pytest.raises(grpc.RpcError) as info:
        stub.Reserve(request_, timeout=5)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT and words in info.value.details()


def test_two_clients_assign_the_same_gpu_at_once_exactly_one_wins(node) -> None:
    daemon, stub = node
    first, second = submit(stub, ["sleep", "30"]), submit(stub, ["sleep", "30"])
    barrier, results = threading.Barrier(2), {}

    def assign(workload_id: str) -> None:
        with grpc.insecure_channel(str(daemon.address)) as channel:
            client = pb_grpc.NodeServiceStub(channel)
            barrier.wait()
            try:
                request = pb.AssignWorkloadRequest(workload_id=workload_id, gpu_indices=[3])
                client.AssignWorkload(request, timeout=5)
                results[workload_id] = "won"
            except grpc.RpcError as exc:
                results[workload_id] = exc.details()

    threads = [threading.Thread(target=assign, args=(w.id,)) for w in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert sorted(results.values(), key=lambda r: r != "won")[0] == "won"
    loser = next(r for r in results.values() if r != "won")
    assert "GPU 3 is already taken by workload" in loser


def test_workload_runs_on_its_gpus_with_output_and_exit_code(start_daemon) -> None:
    # Seed 0: GPU 0 computes for a simulated user, so auto placement has GPUs 1-3.
    daemon = start_daemon(gpus=4, model="h100", seed=0)
    wait_for(lambda: daemon.sampler.latest is not None)
    channel = grpc.insecure_channel(str(daemon.address))
    stub = pb_grpc.NodeServiceStub(channel)
    queued = submit(stub, ["sh", "-c", 'echo "on $CUDA_VISIBLE_DEVICES"; exit 3'], gpus=2,
                    auto_place=True, name="probe")  # fmt: skip
    wait_for(lambda: workload(stub, queued.id).state == pb.WORKLOAD_STATE_FAILED, 10, "its end")
    ended = workload(stub, queued.id)
    assert ended.exit_code == 3 and len(ended.gpu_indices) == 2
    uuids = [daemon.sampler.status.facts.gpus[g].uuid for g in ended.gpu_indices]
    output = stub.GetWorkloadOutput(pb.GetWorkloadOutputRequest(workload_id=queued.id), timeout=5)
    assert output.output.decode().strip() == f"on {','.join(uuids)}"
    kinds = [e.kind for e in daemon.journal.events_after(0) if e.workload.id == queued.id]
    assert kinds == [pb.EVENT_KIND_WORKLOAD_QUEUED, pb.EVENT_KIND_WORKLOAD_STARTED,
                     pb.EVENT_KIND_WORKLOAD_FAILED]  # fmt: skip
    assert 0 not in ended.gpu_indices  # the simulated user's GPU
    channel.close()


def test_a_started_workload_drives_its_simulated_gpu(node) -> None:
    daemon, stub = node
    run_on_gpu(daemon, stub, ["sleep", "300"], gpu=3)
    wait_for(lambda: (daemon.sampler.latest.readings[3][UTIL_GPU_PCT] or 0) > 80, 10, "load")


def test_cancel_queued_and_running(node) -> None:
    _, stub = node
    queued = submit(stub, ["sleep", "300"])
    cancelled = stub.CancelWorkload(pb.CancelWorkloadRequest(workload_id=queued.id), timeout=5)
    assert cancelled.state == pb.WORKLOAD_STATE_CANCELLED
    running = submit(stub, ["sleep", "300"])
    stub.AssignWorkload(
        pb.AssignWorkloadRequest(workload_id=running.id, gpu_indices=[0]), timeout=5
    )
    stub.CancelWorkload(pb.CancelWorkloadRequest(workload_id=running.id), timeout=5)
    wait_for(lambda: workload(stub, running.id).state == pb.WORKLOAD_STATE_CANCELLED, 15)
    with pytest.raises(grpc.RpcError) as info:
        stub.AssignWorkload(
            pb.AssignWorkloadRequest(workload_id=running.id, gpu_indices=[1]), timeout=5
        )
    assert info.value.code() == grpc.StatusCode.NOT_FOUND


def test_bad_submissions(node) -> None:
    _, stub = node
    for request, words in (
        (pb.SubmitWorkloadRequest(argv=[], gpu_count=1), "needs a command"),
        (pb.SubmitWorkloadRequest(argv=["x"], gpu_count=0), "gpu_count must be"),
        (pb.SubmitWorkloadRequest(argv=["x"], gpu_count=99), "gpu_count must be"),
    ):
        with pytest.raises(grpc.RpcError) as info:
            stub.SubmitWorkload(request, timeout=5)
        assert (
            info.value.code() == grpc.StatusCode.INVALID_ARGUMENT and words in info.value.details()
        )
    refused = stub.ListWorkloads(pb.ListWorkloadsRequest(include_ended=True), timeout=5)
    assert list(refused.workloads) == []  # none of them was queued


@pytest.mark.slow
def test_workload_survives_a_daemon_restart_and_stays_controllable(tmp_path) -> None:
    from tests.daemon_process import DaemonProcess

    args = ("--backend", "simulated", "--gpus", "2", "--interval", "0.1")
    daemon = DaemonProcess(tmp_path, *args).start()
    try:
        with grpc.insecure_channel(daemon.address) as channel:
            stub = pb_grpc.NodeServiceStub(channel)
            queued = submit(stub, ["sleep", "300"])
            request = pb.AssignWorkloadRequest(workload_id=queued.id, gpu_indices=[1])
            running = stub.AssignWorkload(request, timeout=5)
        assert daemon.kill(signal.SIGTERM) == 0  # a clean restart, as systemd does it
        assert process_start_time_unix_ms(running.pid) is not None  # the workload lives on
        daemon.start()
        with grpc.insecure_channel(daemon.address) as channel:
            stub = pb_grpc.NodeServiceStub(channel)
            adopted = workload(stub, queued.id)
            assert adopted.state == pb.WORKLOAD_STATE_RUNNING and adopted.pid == running.pid
            stub.CancelWorkload(pb.CancelWorkloadRequest(workload_id=queued.id), timeout=5)
            wait_for(lambda: workload(stub, queued.id).state == pb.WORKLOAD_STATE_CANCELLED, 15)
        assert process_start_time_unix_ms(running.pid) is None
    finally:
        daemon.stop()


def test_submit_cli(node) -> None:
    daemon, stub = node
    result = subprocess.run(
        [sys.executable, "-m", "node_daemon", "submit", "--node", str(daemon.address),
         "--gpus", "1", "--min-memory", "1G", "--name", "hello", "--assign", "2",
         "--owner", "alice", "--", "echo", "hi there"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    named, state, *where = result.stdout.split()
    # Named as the fleet names workloads: NODE/ID (the node by its host name).
    host, _, workload_id = named.rpartition("/")
    assert host == stub.GetInventory(pb.GetInventoryRequest(), timeout=5).hostname, named
    assert state == "running" and where == ["on", "GPU", "2"]
    wait_for(lambda: workload(stub, workload_id).state == pb.WORKLOAD_STATE_FINISHED, 10)
    output = stub.GetWorkloadOutput(pb.GetWorkloadOutputRequest(workload_id=workload_id), timeout=5)
    assert output.output == b"hi there\n"
    refused = subprocess.run(
        [sys.executable, "-m", "node_daemon", "submit", "--node", str(daemon.address),
         "--gpus", "1", "--assign", "7", "--owner", "alice", "--", "true"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert refused.returncode == 1 and "no GPU 7 on this node" in refused.stderr


def test_a_process_the_daemon_may_not_signal_is_a_clear_refusal(monkeypatch) -> None:
    """Without CAP_KILL another user's process cannot be signalled: say why, not 'EPERM'."""
    sleeper = subprocess.Popen(["sleep", "300"])
    try:
        started = process_start_time_unix_ms(sleeper.pid)

        def refuse(_pidfd: int, _signum: int) -> None:
            raise PermissionError(1, "Operation not permitted")

        monkeypatch.setattr(signal, "pidfd_send_signal", refuse)
        with pytest.raises(PermissionError, match="needs CAP_KILL"):
            kill_process(sleeper.pid, started, grace_s=1)
        assert sleeper.poll() is None
    finally:
        sleeper.kill()
        sleeper.wait()


@pytest.mark.parametrize(
    ("call", "request_", "words"),
    [
        ("ReleaseReservation", pb.ReleaseReservationRequest(reservation_id="r-999"),
         "no active reservation r-999 on this node"),
        ("AssignWorkload", pb.AssignWorkloadRequest(workload_id="w-999", gpu_indices=[0]),
         "no workload w-999 on this node"),
        ("CancelWorkload", pb.CancelWorkloadRequest(workload_id="w-999"),
         "no workload w-999 on this node"),
        ("GetWorkloadOutput", pb.GetWorkloadOutputRequest(workload_id="w-999"),
         "no workload w-999 on this node"),
    ],
)  # fmt: skip
def test_unknown_ids_are_not_found_and_say_which(node, call, request_, words) -> None:
    _, stub = node
    with pytest.raises(grpc.RpcError) as info:
        getattr(stub, call)(request_, timeout=5)
    assert info.value.code() == grpc.StatusCode.NOT_FOUND and words in info.value.details()


def bug(*_args: object, **_kwargs: object) -> None:
    raise KeyError("r-1")  # a lookup gone wrong inside the daemon, worded like an answer


def logged_key_error(caplog: pytest.LogCaptureFixture) -> bool:
    return any(r.exc_info and r.exc_info[0] is KeyError for r in caplog.records)


def test_a_key_error_from_a_bug_is_not_answered_not_found(node, monkeypatch, caplog) -> None:
    """A KeyError inside a call is a bug: UNKNOWN and logged, never "no such reservation"."""
    daemon, stub = node
    held = stub.Reserve(pb.ReserveRequest(gpu_indices=[0], holder="alice",
                                          until_unix_ms=in_an_hour()), timeout=5)  # fmt: skip
    queued = submit(stub, ["sleep", "300"])
    monkeypatch.setattr(daemon.reservations, "get", bug)
    monkeypatch.setattr(daemon.workloads, "get", bug)
    calls = [
        (stub.ReleaseReservation, pb.ReleaseReservationRequest(reservation_id=held.id)),
        (stub.CancelWorkload, pb.CancelWorkloadRequest(workload_id=queued.id)),
    ]
    for call, request_ in calls:
        caplog.clear()
        with pytest.raises(grpc.RpcError) as info:
            call(request_, timeout=5)
        assert info.value.code() == grpc.StatusCode.UNKNOWN, info.value.details()
        assert logged_key_error(caplog), "the bug's traceback is in the daemon's log"
    monkeypatch.undo()
    # Nothing was done, and the daemon still answers the same calls.
    assert workload(stub, queued.id).state == pb.WORKLOAD_STATE_QUEUED
    released = stub.ReleaseReservation(
        pb.ReleaseReservationRequest(reservation_id=held.id), timeout=5
    )
    assert not released.active
    cancelled = stub.CancelWorkload(pb.CancelWorkloadRequest(workload_id=queued.id), timeout=5)
    assert cancelled.state == pb.WORKLOAD_STATE_CANCELLED


def test_the_daemon_failing_to_read_a_file_is_not_the_caller_being_denied(
    node, monkeypatch, caplog
) -> None:
    """An OSError's PermissionError is the daemon's problem, not PERMISSION_DENIED."""
    daemon, stub = node
    queued = submit(stub, ["sleep", "300"])

    def unreadable(*_args: object) -> None:
        raise PermissionError(13, "Permission denied", "/var/lib/gpufleet/workloads/output")

    monkeypatch.setattr(daemon.workloads, "output", unreadable)
    with pytest.raises(grpc.RpcError) as info:
        stub.GetWorkloadOutput(pb.GetWorkloadOutputRequest(workload_id=queued.id), timeout=5)
    assert info.value.code() == grpc.StatusCode.UNKNOWN, info.value.details()
    assert any(r.exc_info and r.exc_info[0] is PermissionError for r in caplog.records)
    monkeypatch.undo()
    output = stub.GetWorkloadOutput(pb.GetWorkloadOutputRequest(workload_id=queued.id), timeout=5)
    assert output.total_bytes == 0  # answered again, once the daemon can read it
