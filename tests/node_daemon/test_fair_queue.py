"""The fair queue (#14): order, holds for the head, backfill, outside processes, walltime, retries.

The policy on its own (plan_queue, no daemon), then a real daemon over gRPC with
real processes: a large workload is not starved by small ones behind it, a GPU
another user computes on is never auto-placed on, a time limit stops a
workload (TERM, then KILL), and a retried submit finds its workload.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import grpc
import pytest

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.backends.readings import GpuReading, ProcessReading
from node_daemon.control.placement import GpuFacts
from node_daemon.control.queue_policy import Waiting, plan_queue, queue_order
from node_daemon.control.settings import WorkloadSettings
from node_daemon.server import NodeDaemon
from tests.conftest import DaemonFactory, wait_for

GIB = 1024**3
NOW = 1_700_000_000_000


def gpu(index: int, busy_with: str | None = None, outside: bool = False) -> GpuFacts:
    reading = GpuReading(index, mem_total_bytes=80 * GIB, mem_used_bytes=0, temp_gpu_c=40.0 + index)
    others = (ProcessReading(pid=4242, user="bob", command="python train.py"),) if outside else ()
    return GpuFacts(reading, None, None, "", busy_with, None, others)


def job(name: str, gpus: int, queued: int, priority: int = 0, limit_s: int = 0) -> Waiting:
    return Waiting(name, "alice", (), gpus, 0, priority, queued, limit_s)


# -- the policy ---------------------------------------------------------------------


def test_order_is_priority_then_first_queued() -> None:
    jobs = [job("w-3", 1, 30), job("w-1", 1, 10), job("w-2", 1, 20, priority=5)]
    assert [w.id for w in queue_order(jobs)] == ["w-2", "w-1", "w-3"]


def test_small_jobs_behind_a_large_head_do_not_take_its_gpus() -> None:
    # GPU 0 runs w-1 with no time limit; GPUs 1 and 2 are free; the 3-GPU head waits.
    gpus = {0: gpu(0, busy_with="w-1"), 1: gpu(1), 2: gpu(2)}
    head, small = job("w-2", 3, 20), job("w-3", 1, 30)
    plan = plan_queue([small, head], gpus, {0: None}, NOW)
    assert plan.starts == []
    assert plan.held == {"w-2": (1, 2)}
    assert plan.reasons["w-2"].startswith("next in line: GPU 1, 2 held for it")
    assert "has no time limit" in plan.reasons["w-2"]
    assert plan.reasons["w-3"] == "behind w-2 (queued earlier), which holds the GPUs it could use"


def test_a_freed_gpu_goes_to_the_head_first() -> None:
    gpus = {0: gpu(0), 1: gpu(1), 2: gpu(2)}
    plan = plan_queue([job("w-3", 1, 30), job("w-2", 3, 20)], gpus, {}, NOW)
    assert plan.starts == [("w-2", [0, 1, 2])]
    # Nothing left for it: it leads the queue now, holding nothing yet.
    assert plan.reasons["w-3"].startswith("next in line: waiting for 1 more GPU")


def test_backfill_only_when_it_ends_before_the_head_could_start() -> None:
    # w-1 on GPU 0 stops at its limit in 10 minutes: the head can start then, not sooner.
    gpus = {0: gpu(0, busy_with="w-1"), 1: gpu(1), 2: gpu(2)}
    frees = {0: NOW + 600_000}
    head = job("w-2", 3, 20)
    short = job("w-3", 1, 30, limit_s=300)  # done in 5 minutes: cannot delay the head
    long = job("w-4", 1, 40, limit_s=3600)  # would still run when the head could start
    plan = plan_queue([head, short, long], gpus, frees, NOW)
    assert plan.starts == [("w-3", [1])]
    assert plan.held == {"w-2": (2,)}
    assert "w-4" in plan.reasons and plan.reasons["w-4"].startswith("behind w-2")
    assert "the next frees by" in plan.reasons["w-2"]


def test_a_higher_priority_job_leads_and_says_why_others_wait() -> None:
    gpus = {0: gpu(0, busy_with="w-1"), 1: gpu(1)}
    plan = plan_queue([job("w-2", 1, 20), job("w-3", 2, 30, priority=10)], gpus, {0: None}, NOW)
    assert plan.held == {"w-3": (1,)}
    assert (
        plan.reasons["w-2"] == "behind w-3 (priority 10 over 0), which holds the GPUs it could use"
    )


def test_outside_processes_make_a_gpu_busy() -> None:
    gpus = {0: gpu(0, outside=True), 1: gpu(1)}
    plan = plan_queue([job("w-1", 1, 10), job("w-2", 1, 20)], gpus, {}, NOW)
    assert plan.starts == [("w-1", [1])]
    assert plan.reasons["w-2"].startswith("next in line: waiting for 1 more GPU")


def test_a_head_that_could_never_run_here_blocks_nobody() -> None:
    reserved = replace(gpu(1), reserved_for="bob", reserved_reason="paper deadline")
    gpus = {0: gpu(0, busy_with="w-1"), 1: reserved, 2: gpu(2)}
    plan = plan_queue([job("w-2", 3, 20), job("w-3", 1, 30)], gpus, {0: None}, NOW)
    assert plan.starts == [("w-3", [2])]
    assert plan.held == {}
    assert plan.reasons["w-2"].startswith("cannot run here now: needs 3 GPUs, 2 could take it")
    assert "GPU 1 is reserved for bob (paper deadline)" in plan.reasons["w-2"]


# -- a real daemon --------------------------------------------------------------------


def submit(
    stub: pb_grpc.NodeServiceStub, argv: list[str], gpus: int = 1, **extra: object
) -> pb.Workload:
    request = pb.SubmitWorkloadRequest(argv=argv, owner="alice", gpu_count=gpus, actor="alice",
                                       auto_place=True, **extra)  # type: ignore[arg-type]  # fmt: skip
    return stub.SubmitWorkload(request, timeout=5)


def listed(stub: pb_grpc.NodeServiceStub, workload_id: str) -> pb.Workload:
    reply = stub.ListWorkloads(pb.ListWorkloadsRequest(include_ended=True), timeout=5)
    return next(w for w in reply.workloads if w.id == workload_id)


@pytest.fixture
def node(start_daemon: DaemonFactory) -> Iterator[tuple[NodeDaemon, pb_grpc.NodeServiceStub]]:
    # Seed 3 on 4 GPUs: a simulated user computes on GPU 2; GPUs 0, 1 and 3 are free.
    daemon = start_daemon(
        gpus=4, model="h100", seed=3,
        workloads=WorkloadSettings(time_limit_grace_s=1, max_time_limit_s=7200),
    )  # fmt: skip
    wait_for(lambda: daemon.sampler.latest is not None)
    with grpc.insecure_channel(str(daemon.address)) as channel:
        yield daemon, pb_grpc.NodeServiceStub(channel)


def outside_gpus(daemon: NodeDaemon) -> set[int]:
    latest = daemon.sampler.latest
    assert latest is not None
    return {i for i, processes in latest.processes.items() if processes}


@pytest.mark.usefixtures("workload_accounts")
def test_a_large_job_is_not_starved_by_small_ones_behind_it(node) -> None:
    daemon, stub = node
    assert outside_gpus(daemon) == {2}
    first = submit(stub, ["sleep", "2"])
    wait_for(lambda: listed(stub, first.id).state == pb.WORKLOAD_STATE_RUNNING, 10, "the first")
    large = submit(stub, ["sleep", "30"], gpus=3)
    small = [submit(stub, ["sleep", "2"]) for _ in range(3)]
    wait_for(lambda: listed(stub, large.id).held_gpu_indices, 10, "GPUs held for the large job")
    waiting = listed(stub, large.id)
    assert waiting.wait_reason.startswith("next in line:"), waiting.wait_reason
    assert 2 not in waiting.held_gpu_indices
    assert listed(stub, small[0].id).wait_reason.startswith(f"behind {large.id}")
    # When the first ends, its GPU goes to the large job, not to the small ones.
    wait_for(lambda: listed(stub, large.id).state == pb.WORKLOAD_STATE_RUNNING, 20, "the large job")
    started = listed(stub, large.id)
    assert sorted(started.gpu_indices) == [0, 1, 3] and started.wait_reason == ""
    for w in small:
        assert listed(stub, w.id).state == pb.WORKLOAD_STATE_QUEUED


@pytest.mark.usefixtures("workload_accounts")
def test_a_gpu_someone_computes_on_is_never_auto_placed_on(node) -> None:
    daemon, stub = node
    assert outside_gpus(daemon) == {2}
    jobs = [submit(stub, ["sleep", "30"]) for _ in range(4)]
    wait_for(lambda: sum(listed(stub, w.id).state == pb.WORKLOAD_STATE_RUNNING for w in jobs) == 3,
             10, "three running")  # fmt: skip
    placed = {g for w in jobs for g in listed(stub, w.id).gpu_indices}
    assert placed == {0, 1, 3}
    last = listed(stub, jobs[3].id)
    assert last.state == pb.WORKLOAD_STATE_QUEUED
    assert last.wait_reason.startswith("next in line: waiting for 1 more GPU"), last.wait_reason


@pytest.mark.usefixtures("workload_accounts")
def test_a_time_limit_stops_a_workload_term_then_kill(node) -> None:
    _, stub = node
    polite = submit(stub, ["sleep", "300"], time_limit_s=1)
    stubborn = submit(stub, ["sh", "-c", "trap '' TERM; exec sleep 300"], time_limit_s=1)
    for w in (polite, stubborn):
        wait_for(lambda w=w: listed(stub, w.id).state == pb.WORKLOAD_STATE_TIMED_OUT, 20,
                 f"{w.id} timed out")  # fmt: skip
        ended = listed(stub, w.id)
        assert "time limit 0:00:01 reached" in ended.detail
        assert ended.time_limit_s == 1
    assert listed(stub, stubborn.id).exit_code != 0


@pytest.mark.usefixtures("workload_accounts")
def test_a_time_limit_over_the_nodes_cap_is_refused(node) -> None:
    _, stub = node
    with pytest.raises(grpc.RpcError) as refused:
        submit(stub, ["true"], time_limit_s=7201)
    assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert (
        refused.value.details() == "time limit 7201 s exceeds this node's max_time_limit_s (7200 s)"
    )


@pytest.mark.usefixtures("workload_accounts")
def test_a_retried_submit_finds_its_workload_even_after_a_restart(
    start_daemon: DaemonFactory, tmp_path
) -> None:
    state = tmp_path / "state"
    daemon = start_daemon(gpus=2, seed=0, state_dir=state)
    argv = ["sleep", "300"]
    with grpc.insecure_channel(str(daemon.address)) as channel:
        stub = pb_grpc.NodeServiceStub(channel)
        request = dict(gpus=2, idempotency_key="move:node-a/w-7", moved_from="node-a/w-7")
        first = submit(stub, argv, **request)
        again = submit(stub, argv, **request)
        assert again.id == first.id and again.moved_from == "node-a/w-7"
        with pytest.raises(grpc.RpcError) as refused:
            submit(stub, ["sleep", "1"], **request)
        assert refused.value.code() is grpc.StatusCode.FAILED_PRECONDITION
        assert "idempotency key 'move:node-a/w-7' was used for workload" in refused.value.details()
    daemon.stop(grace_s=0.5)
    restarted = start_daemon(gpus=2, seed=0, state_dir=state)
    with grpc.insecure_channel(str(restarted.address)) as channel:
        stub = pb_grpc.NodeServiceStub(channel)
        assert submit(stub, argv, **request).id == first.id
        reply = stub.ListWorkloads(pb.ListWorkloadsRequest(include_ended=True), timeout=5)
        assert [w.id for w in reply.workloads] == [first.id]
