"""A forged move must not make a console cancel someone else's work (#28).

Two real daemons with tokens (ada admin; alice and bob operators of no shared
team). bob may not cancel alice's queued workload on node-a; he reads its move
key (any viewer sees it) and submits a workload of his own on node-b with that
key. An open console, ada's or alice's, must leave alice's workload alone,
while it still finishes a real move that was cut short (its original could not
be cancelled), and the node records that cancel as the console's, naming whose
move it finished.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from pytestqt.qtbot import QtBot

from console.connections.decode import decode_workload
from console.connections.security import LinkSecurity
from console.connections.workload_move import Move, StepFailed, move_workload
from console.fleet.control import WorkloadRow
from console.fleet.fleet_queue import interrupted_moves, move_key, unproven_moves
from console.fleet.updates import CommandResult
from console.session import ConsoleSession
from gpufleet.policy import Role
from gpufleet.states import WorkloadState
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.auth.identity import User
from node_daemon.auth.settings import AuthSettings
from node_daemon.auth.tokens import new_token, token_hash
from tests.conftest import DaemonFactory

pytestmark = pytest.mark.usefixtures("workload_accounts")

TOKENS = {name: new_token() for name in ("ada", "alice", "bob")}
USERS = (
    User("ada", Role.ADMIN, (), token_hash(TOKENS["ada"])),
    User("alice", Role.OPERATOR, ("ml",), token_hash(TOKENS["alice"])),
    User("bob", Role.OPERATOR, ("infra",), token_hash(TOKENS["bob"])),
)
SLEEPER = ["sleep", "300"]


@dataclass
class Pair:
    """node-a and node-b, and a blocking call to either as any of the users."""

    a: str
    b: str
    channels: dict[str, grpc.Channel]
    hosts: dict[str, str]

    def stub(self, target: str, user: str) -> Callable[[str, Any], Any]:
        node = pb_grpc.NodeServiceStub(self.channels[target])
        auth = (("authorization", f"Bearer {TOKENS[user]}"),)
        return lambda method, request: getattr(node, method)(request, timeout=5, metadata=auth)

    def call_as(self, user: str) -> Callable[[str, str, Any], Any]:
        """A move's `Call` with `user`'s token."""

        def call(target: str, method: str, request: Any) -> Any:
            try:
                return self.stub(target, user)(method, request)
            except grpc.RpcError as exc:
                raise StepFailed(f"{exc.code().name}: {exc.details()}") from None  # type: ignore[attr-defined]

        return call

    def rows(self, target: str, user: str = "ada") -> list[WorkloadRow]:
        reply = self.stub(target, user)(
            "ListWorkloads", pb.ListWorkloadsRequest(include_ended=True)
        )
        return [decode_workload(target, w) for w in reply.workloads]

    def row(self, target: str, workload_id: str) -> WorkloadRow:
        return next(w for w in self.rows(target) if w.id == workload_id)

    def queue(self, owner: str = "alice") -> WorkloadRow:
        request = pb.SubmitWorkloadRequest(argv=SLEEPER, gpu_count=1, name="train", priority=3,
                                           time_limit_s=600)  # fmt: skip
        return decode_workload(self.a, self.stub(self.a, owner)("SubmitWorkload", request))


@pytest.fixture
def pair(start_daemon: DaemonFactory) -> Iterator[Pair]:
    auth = AuthSettings(USERS)
    a = start_daemon(gpus=4, seed=0, hostname="node-a", auth=auth)
    b = start_daemon(gpus=4, seed=0, hostname="node-b", auth=auth)
    targets = [str(a.address), str(b.address)]
    channels = {t: grpc.insecure_channel(t) for t in targets}
    yield Pair(
        targets[0], targets[1], channels, dict(zip(targets, ("node-a", "node-b"), strict=True))
    )
    for channel in channels.values():
        channel.close()


def forge(pair: Pair, victim: WorkloadRow) -> WorkloadRow:
    """bob's workload on node-b with the key a move of `victim` would carry.

    Everything he can copy he copies (the listing shows it to any viewer); the
    owner he cannot: node-b refuses a workload of alice's from him.
    """
    key = move_key("node-a", victim)
    bob_b = pair.stub(pair.b, "bob")
    request = pb.SubmitWorkloadRequest(
        argv=list(victim.argv), gpu_count=victim.gpu_count, name=victim.name,
        priority=victim.priority, time_limit_s=victim.time_limit_s, idempotency_key=key,
        moved_from=f"node-a/{victim.id}", actor="ada",
    )  # fmt: skip
    as_alice = pb.SubmitWorkloadRequest()
    as_alice.CopyFrom(request)
    as_alice.owner = "alice"
    with pytest.raises(grpc.RpcError) as refused:
        bob_b("SubmitWorkload", as_alice)
    assert refused.value.code() is grpc.StatusCode.PERMISSION_DENIED  # type: ignore[attr-defined]
    copy = decode_workload(pair.b, bob_b("SubmitWorkload", request))
    # The node keeps who it authenticated, not the actor the request names.
    assert (copy.owner, copy.submitted_by, copy.state) == ("bob", "bob", WorkloadState.QUEUED)
    return copy


def cut_move(pair: Pair, row: WorkloadRow, mover: str = "ada") -> str:
    """`mover` moves `row` to node-b, but node-a cannot cancel the original: two copies stay."""
    call = pair.call_as(mover)

    def source_away(target: str, method: str, request: Any) -> Any:
        if target == pair.a and method == "CancelWorkload":
            raise StepFailed("UNAVAILABLE: node-a went away")
        return call(target, method, request)

    outcome = move_workload(source_away, Move(row, "node-a", pair.b, "node-b", (), mover))
    assert outcome.ok and "the original could not be cancelled yet" in outcome.message
    return outcome.new_id


def test_the_daemon_records_the_authenticated_submitter(pair: Pair) -> None:
    victim = pair.queue()
    assert victim.submitted_by == "alice"
    copy = forge(pair, victim)
    assert pair.row(pair.b, copy.id).submitted_by == "bob"  # as listed, not only as answered


@pytest.mark.parametrize("console_user", ["ada", "alice"])
def test_a_forged_move_is_left_alone_and_a_cut_move_is_finished(
    qtbot: QtBot, pair: Pair, console_user: str, caplog: pytest.LogCaptureFixture
) -> None:
    victim = pair.queue()
    forged = forge(pair, victim)
    moved = pair.queue()
    copy_id = cut_move(pair, moved)
    everything = pair.rows(pair.a) + pair.rows(pair.b)
    doubts = unproven_moves(everything, pair.hosts)
    assert [(d.copy.id, d.why) for d in doubts] == [(forged.id, "its owner bob is not alice")]

    session = ConsoleSession([pair.a, pair.b], security=LinkSecurity(token=TOKENS[console_user]))
    results: list[CommandResult] = []
    session.pump.commandFinished.connect(results.append)
    session.start()
    try:
        qtbot.waitUntil(lambda: any(r.what == "finish a move on node-a" for r in results),
                        timeout=15_000)  # fmt: skip

        # The console saw both pairs in one look and asked for every repair it meant
        # then; they run one by one on its one steps worker, so a step queued now
        # answers after all of them.
        def barrier(_call: Any) -> CommandResult:
            return CommandResult(pair.a, "barrier", True, "")

        with qtbot.waitSignal(session.pump.commandFinished, timeout=15_000,
                              check_params_cb=lambda r: r.what == "barrier"):  # fmt: skip
            session.connections.request_steps(pair.a, "barrier", barrier)
    finally:
        session.stop()

    repairs = [r for r in results if r.what.startswith("finish a move")]
    assert [r.ok for r in repairs] == [True], [r.message for r in repairs]
    assert repairs[0].message.startswith(
        f"node-a: cancelled {moved.id} (train): finishing its move to node-b/{copy_id}, "
        "submitted there by ada"
    )
    assert pair.row(pair.a, victim.id).state is WorkloadState.QUEUED  # alice's work stays
    assert pair.row(pair.b, forged.id).state is WorkloadState.QUEUED  # bob's too
    assert pair.row(pair.a, moved.id).state is WorkloadState.CANCELLED
    assert pair.row(pair.b, copy_id).state is WorkloadState.QUEUED
    assert any("is not its move (its owner bob is not alice)" in m for m in caplog.messages)

    audit = pair.stub(pair.a, "ada")("QueryAudit", pb.QueryAuditRequest(method="CancelWorkload"))
    cancels = [
        (r.user, r.target, r.params, r.result) for r in audit.records if r.result != "attempt"
    ]
    assert [(u, t, res) for u, t, _, res in cancels] == [
        (console_user, f"workload_id={moved.id}", "OK")
    ], cancels
    assert "done by a console on its own, finishing its move to node-b/" in cancels[0][2]
    assert "submitted there by ada" in cancels[0][2]


def test_the_proof_holds_only_what_the_owner_or_an_admin_could_do(pair: Pair) -> None:
    """alice moving her own, or ada moving anyone's, proves the move; a copy that asks
    for something else does not, whoever made it."""
    own = pair.queue()
    own_copy = cut_move(pair, own, mover="alice")
    other = pair.queue()
    cut_move(pair, other, mover="ada")
    repairs, conflicts = interrupted_moves(pair.rows(pair.a) + pair.rows(pair.b), pair.hosts)
    assert conflicts == []
    assert sorted((r.cancel.id, r.why.rsplit(", ", 1)[1]) for r in repairs) == sorted(
        [(own.id, "submitted there by alice"), (other.id, "submitted there by ada")]
    )
    # Same owner, same submitter, but not the same request: not this move.
    rows = [
        dataclasses.replace(w, priority=9) if w.id == own_copy and w.target == pair.b else w
        for w in pair.rows(pair.a) + pair.rows(pair.b)
    ]
    assert [d.why for d in unproven_moves(rows, pair.hosts)] == [
        "its priority differ from the original's"
    ]


def test_a_node_without_authentication_records_no_submitter(start_daemon: DaemonFactory) -> None:
    daemon = start_daemon(gpus=1, hostname="open")
    with grpc.insecure_channel(str(daemon.address)) as channel:
        stub = pb_grpc.NodeServiceStub(channel)
        request = pb.SubmitWorkloadRequest(argv=SLEEPER, gpu_count=1, owner="alice", actor="ada")
        made = stub.SubmitWorkload(request, timeout=5)
    assert (made.owner, made.submitted_by) == ("alice", "")  # the actor named is no proof


def test_a_cancel_keeps_its_reason_and_refuses_one_too_long(pair: Pair) -> None:
    row = pair.queue()
    ada_a = pair.stub(pair.a, "ada")
    too_long = pb.CancelWorkloadRequest(workload_id=row.id, reason="x" * 1001)
    with pytest.raises(grpc.RpcError) as refused:
        ada_a("CancelWorkload", too_long)
    assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT  # type: ignore[attr-defined]
    assert "reason" in refused.value.details()  # type: ignore[attr-defined]
    assert pair.row(pair.a, row.id).state is WorkloadState.QUEUED  # nothing done
    ada_a("CancelWorkload", pb.CancelWorkloadRequest(workload_id=row.id, reason="moved by hand"))
    assert pair.row(pair.a, row.id).state is WorkloadState.CANCELLED
    events = ada_a("StreamEvents", pb.StreamEventsRequest())
    try:
        cancelled = next(
            e for e in events
            if e.kind == pb.EVENT_KIND_WORKLOAD_CANCELLED and e.workload.id == row.id
        )  # fmt: skip
    finally:
        events.cancel()
    assert cancelled.summary.endswith("cancelled by ada: moved by hand")
