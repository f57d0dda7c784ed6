"""The bounds of a control request (node_daemon/control/limits.py), over real gRPC.

Free text is bounded and may hold no control character; a command and its
environment are bounded as the kernel bounds them at exec; and however the
node's records were made, one ListWorkloads answer fits a default client's 4 MiB.
"""

from __future__ import annotations

import time

import grpc
import pytest

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.control.limits import MAX_ARG_STRLEN, TEXT_LIMITS, command_budget
from node_daemon.control.workloads import KIND
from node_daemon.journal.event_journal import StoredRecord
from tests.conftest import DaemonFactory, wait_for
from tests.node_daemon.test_control import node, submit, workload  # noqa: F401

pytestmark = pytest.mark.usefixtures("workload_accounts")

THREE_MIB = 3 * 1024 * 1024
# What a client that sets no option accepts (grpc's default max_receive_message_length).
CLIENT_DEFAULT_BYTES = 4 * 1024 * 1024


def refusal(call, request) -> grpc.RpcError:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.RpcError) as info:
        call(request, timeout=30)
    return info.value


def listed(stub: pb_grpc.NodeServiceStub, include_ended: bool = False) -> list[pb.Workload]:
    reply = stub.ListWorkloads(pb.ListWorkloadsRequest(include_ended=include_ended), timeout=30)
    return list(reply.workloads)


@pytest.mark.parametrize("field", ["moved_from", "idempotency_key", "name"])
def test_megabytes_of_free_text_are_refused_naming_the_field(node, field: str) -> None:  # noqa: F811
    _, stub = node
    request = pb.SubmitWorkloadRequest(argv=["true"], owner="alice", gpu_count=1)
    setattr(request, field, "x" * THREE_MIB)
    refused = refusal(stub.SubmitWorkload, request)
    assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert refused.details() == (
        f"{field} is {THREE_MIB} characters long; at most {TEXT_LIMITS[field]} are allowed"
    )
    assert listed(stub, include_ended=True) == []  # nothing was queued


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("name", "train\nFAKE LOG LINE"),
        ("idempotency_key", "key\x1b[31m"),
        ("moved_from", "gpu-node-03/w-1\r"),
        ("actor", "ada\x07"),
        ("owner", "alice\x00"),
    ],
)
def test_control_characters_are_refused(node, field: str, value: str) -> None:  # noqa: F811
    _, stub = node
    request = pb.SubmitWorkloadRequest(argv=["true"], owner="alice", gpu_count=1)
    setattr(request, field, value)
    refused = refusal(stub.SubmitWorkload, request)
    assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert refused.details().startswith(f"{field} may not contain control characters")
    assert listed(stub, include_ended=True) == []


def test_a_reservation_reason_with_control_characters_is_refused(node) -> None:  # noqa: F811
    _, stub = node
    request = pb.ReserveRequest(gpu_indices=[0], holder="alice", until_unix_ms=2**41,
                                reason="maintenance\n2026-01-01 admin: all clear")  # fmt: skip
    refused = refusal(stub.Reserve, request)
    assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert refused.details().startswith("reason may not contain control characters")
    assert list(stub.ListReservations(pb.ListReservationsRequest(), timeout=5).reservations) == []


@pytest.mark.parametrize(
    ("method", "request_"),
    [
        ("AssignWorkload", pb.AssignWorkloadRequest(workload_id="w-1", gpu_indices=[0])),
        ("CancelWorkload", pb.CancelWorkloadRequest(workload_id="w-1")),
        ("ReleaseReservation", pb.ReleaseReservationRequest(reservation_id="r-1")),
        ("KillProcess", pb.KillProcessRequest(gpu_index=0, pid=2)),
    ],
)
def test_an_actor_with_control_characters_is_refused_by_every_action(
    node,  # noqa: F811
    method: str,
    request_,  # type: ignore[no-untyped-def]
) -> None:
    _, stub = node
    request_.actor = "ada\n2026-01-01 admin: all clear"
    refused = refusal(getattr(stub, method), request_)
    assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert refused.details().startswith("actor may not contain control characters")


def test_an_env_entry_past_max_arg_strlen_is_refused_and_one_at_it_runs(node) -> None:  # noqa: F811
    _, stub = node
    # "BIG=" + value + NUL: MAX_ARG_STRLEN bytes is the most execve passes on.
    at_limit = MAX_ARG_STRLEN - len("BIG=") - 1
    too_long = pb.SubmitWorkloadRequest(argv=["true"], owner="alice", gpu_count=1,
                                        env={"BIG": "x" * (at_limit + 1)})  # fmt: skip
    refused = refusal(stub.SubmitWorkload, too_long)
    assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert refused.details() == (
        f"env entry 'BIG': BIG=VALUE is {MAX_ARG_STRLEN + 1} bytes with its NUL; the kernel "
        f"passes at most {MAX_ARG_STRLEN} (MAX_ARG_STRLEN) to a program"
    )
    runs = submit(stub, ["sh", "-c", 'printf %s "${#BIG}"'], env={"BIG": "x" * at_limit})
    stub.AssignWorkload(pb.AssignWorkloadRequest(workload_id=runs.id, gpu_indices=[0]), timeout=5)
    wait_for(lambda: workload(stub, runs.id).state != pb.WORKLOAD_STATE_RUNNING, 15, "its end")
    ended = workload(stub, runs.id)
    assert (ended.state, ended.exit_code) == (pb.WORKLOAD_STATE_FINISHED, 0), ended.detail
    output = stub.GetWorkloadOutput(pb.GetWorkloadOutputRequest(workload_id=runs.id), timeout=5)
    assert output.output == str(at_limit).encode()


def test_argv_and_env_past_the_nodes_arg_max_are_refused(node) -> None:  # noqa: F811
    _, stub = node
    budget = command_budget()
    entry = "x" * (MAX_ARG_STRLEN - 16)  # each entry fits; together they do not
    env = {f"V{i}": entry for i in range(budget // MAX_ARG_STRLEN + 1)}
    refused = refusal(stub.SubmitWorkload, pb.SubmitWorkloadRequest(
        argv=["true"], owner="alice", gpu_count=1, env=env))  # fmt: skip
    assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert f"this node allows {budget}" in refused.details()


def maximal(index: int) -> pb.SubmitWorkloadRequest:
    """A workload as big as the limits let one be: every text field full, argv+env at budget."""
    argv = ["true"]
    room = command_budget() - (len("true") + 1) - 8 * (len(argv) + 2 + 2)
    first = MAX_ARG_STRLEN - len("A=") - 1
    second = room - MAX_ARG_STRLEN - len("B=") - 1
    return pb.SubmitWorkloadRequest(
        argv=argv, owner="alice", gpu_count=1, actor="a" * TEXT_LIMITS["actor"],
        env={"A": "a" * first, "B": "b" * second}, name="n" * TEXT_LIMITS["name"],
        idempotency_key=f"{index:08d}".ljust(TEXT_LIMITS["idempotency_key"], "k"),
        moved_from="m" * TEXT_LIMITS["moved_from"],
    )  # fmt: skip


def fill_the_queue(stub: pb_grpc.NodeServiceStub, first: int) -> list[str]:
    """Submit maximal workloads until the node says its queue is full; their ids."""
    queued: list[str] = []
    for index in range(first, first + 40):
        try:
            queued.append(stub.SubmitWorkload(maximal(index), timeout=30).id)
        except grpc.RpcError as exc:
            assert exc.code() == grpc.StatusCode.FAILED_PRECONDITION, exc.details()
            assert "this node's queue is full" in exc.details()
            return queued
    raise AssertionError("40 maximal workloads were queued: the queue has no bound")


@pytest.mark.slow
def test_a_listing_stays_under_4_mib_with_many_maximal_submits(node) -> None:  # noqa: F811
    _, stub = node
    first = fill_the_queue(stub, 0)
    assert len(first) >= 8  # the bound leaves room for a real queue of big workloads
    shown = listed(stub)  # a default client: it accepts at most 4 MiB
    assert [w.id for w in shown] == first  # every queued workload, whole
    assert all(len(w.env["A"]) == len(maximal(0).env["A"]) for w in shown)
    for workload_id in first:
        stub.CancelWorkload(pb.CancelWorkloadRequest(workload_id=workload_id), timeout=5)
    second = fill_the_queue(stub, 100)
    reply = stub.ListWorkloads(pb.ListWorkloadsRequest(include_ended=True), timeout=30)
    assert reply.ByteSize() < CLIENT_DEFAULT_BYTES
    ids = [w.id for w in reply.workloads]
    assert set(second) <= set(ids)  # the queue is always there in full
    ended = [i for i in ids if i in first]
    assert ended and ended == first[len(first) - len(ended) :]  # the newest ended, in order
    assert len(ended) < len(first)  # the oldest were left out


def test_a_journal_with_megabytes_of_free_text_from_before_the_limits(
    start_daemon: DaemonFactory, tmp_path
) -> None:
    state = tmp_path / "state"
    daemon = start_daemon(gpus=2, state_dir=state)
    old = pb.Workload(id="w-7", name="old", argv=["true"], owner="alice", run_as="alice",
                      gpu_count=1, state=pb.WORKLOAD_STATE_QUEUED, queued_unix_ms=1,
                      moved_from="m" * THREE_MIB, idempotency_key="k" * THREE_MIB)  # fmt: skip
    stored = StoredRecord(KIND, old.id, True, int(time.time() * 1000), old.SerializeToString())
    daemon.journal.record([], records=[stored])  # as a daemon before the limits wrote it
    daemon.stop(grace_s=0.5)
    again = start_daemon(gpus=2, state_dir=state)
    with grpc.insecure_channel(str(again.address)) as channel:
        stub = pb_grpc.NodeServiceStub(channel)
        (read_back,) = listed(stub, include_ended=True)
        assert read_back.id == "w-7" and read_back.ByteSize() < 2048
        assert read_back.moved_from.endswith(f"… ({THREE_MIB} characters, cut)")
        assert len(read_back.moved_from) == TEXT_LIMITS["moved_from"]
        assert read_back.idempotency_key == ""  # no submit can carry it any more
        # It is still the queue's: it can be cancelled, and the next workload numbers on.
        cancel = pb.CancelWorkloadRequest(workload_id="w-7")
        assert stub.CancelWorkload(cancel, timeout=5).state == pb.WORKLOAD_STATE_CANCELLED
        assert submit(stub, ["true"]).id == "w-8"
