"""One queue across the fleet (#14): a workload moves between two real daemons.

A move is two steps (submit on the target with an idempotency key, cancel at
the source); a crash injected between them must still leave exactly one
copy: a retry finds the copy it made, and the next console to see both
copies cancels the extra one on its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import pytest

from console.connections.decode import decode_workload
from console.connections.workload_move import Move, StepFailed, move_workload, repair_move
from console.fleet.control import WorkloadRow
from console.fleet.fleet_queue import interrupted_moves, qualified_id, split_qualified
from console.fleet.updates import LinkState
from console.qt.workload_model import COLUMNS, WorkloadTableModel
from console.session import ConsoleSession
from console.views.control.submit_dialog import SubmitDialog
from gpufleet.states import WorkloadState
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from tests.conftest import DaemonFactory, wait_for
from tests.console.test_control_model import A, B, fleet_with, workload

pytestmark = pytest.mark.usefixtures("workload_accounts")

SLEEPER = ["sleep", "300"]


class Crash(Exception):
    """The console dies between the move's two steps."""


@dataclass
class Fleet:
    a: str
    b: str
    stubs: dict[str, pb_grpc.NodeServiceStub]
    hosts: dict[str, str]

    def call(self, target: str, method: str, request: Any) -> Any:
        try:
            return getattr(self.stubs[target], method)(request, timeout=5)
        except grpc.RpcError as exc:
            raise StepFailed(f"{exc.code().name}: {exc.details()}") from None  # type: ignore[attr-defined]

    def rows(self, target: str) -> list[WorkloadRow]:
        reply = self.stubs[target].ListWorkloads(
            pb.ListWorkloadsRequest(include_ended=True), timeout=5
        )
        return [decode_workload(target, w) for w in reply.workloads]

    def live(self) -> list[tuple[str, WorkloadRow]]:
        """Every queued or running workload of the fleet, by its node's host name."""
        return [
            (self.hosts[t], w) for t in (self.a, self.b) for w in self.rows(t) if not w.state.ended
        ]

    def queue(self, owner: str = "alice") -> WorkloadRow:
        request = pb.SubmitWorkloadRequest(argv=SLEEPER, owner=owner, gpu_count=1, name="sleeper",
                                           actor=owner, priority=3, time_limit_s=600)  # fmt: skip
        made = self.stubs[self.a].SubmitWorkload(request, timeout=5)
        return decode_workload(self.a, made)

    def move(self, row: WorkloadRow, gpus: tuple[int, ...] = (1,)) -> Move:
        return Move(row, "node-a", self.b, "node-b", gpus, "alice")


@pytest.fixture
def fleet(start_daemon: DaemonFactory) -> Iterator[Fleet]:
    # Seed 0: a simulated user computes on GPU 0 of each node; GPUs 1-3 are free.
    a = start_daemon(gpus=4, seed=0, hostname="node-a")
    b = start_daemon(gpus=4, seed=0, hostname="node-b")
    channels = [grpc.insecure_channel(str(d.address)) for d in (a, b)]
    targets = [str(a.address), str(b.address)]
    stubs = {t: pb_grpc.NodeServiceStub(c) for t, c in zip(targets, channels, strict=True)}
    yield Fleet(targets[0], targets[1], stubs, {targets[0]: "node-a", targets[1]: "node-b"})
    for channel in channels:
        channel.close()


def test_ids_are_named_with_their_node() -> None:
    assert qualified_id("gpu-node-03", "w-12") == "gpu-node-03/w-12"
    assert split_qualified("gpu-node-03/w-12") == ("gpu-node-03", "w-12")
    with pytest.raises(ValueError, match="is not NODE/ID"):
        split_qualified("w-12")


def test_a_move_leaves_one_copy_started_where_it_was_dropped(fleet: Fleet) -> None:
    queued = fleet.queue()
    outcome = move_workload(fleet.call, fleet.move(queued))
    assert outcome.ok, outcome.message
    assert outcome.message == (
        f"moved node-a/{queued.id} (sleeper) of alice to node-b/{outcome.new_id} "
        "and started on GPU 1"
    )
    live = fleet.live()
    assert [(host, w.id) for host, w in live] == [("node-b", outcome.new_id)]
    copy = live[0][1]
    assert copy.state is WorkloadState.RUNNING and copy.gpu_indices == (1,)
    assert (copy.moved_from, copy.priority, copy.time_limit_s) == (f"node-a/{queued.id}", 3, 600)
    source = next(w for w in fleet.rows(fleet.a) if w.id == queued.id)
    assert source.state is WorkloadState.CANCELLED


def test_a_refused_start_leaves_it_where_it_was(fleet: Fleet) -> None:
    queued = fleet.queue()
    outcome = move_workload(fleet.call, fleet.move(queued, gpus=(7,)))
    assert not outcome.ok
    assert outcome.message.startswith(f"node-a/{queued.id} stays on node-a: node-b would not "
                                      "start it on GPU 7: INVALID_ARGUMENT: no GPU 7")  # fmt: skip
    assert [(host, w.id) for host, w in fleet.live()] == [("node-a", queued.id)]


def crash_at_cancel(fleet: Fleet, source: str):  # type: ignore[no-untyped-def]
    def call(target: str, method: str, request: Any) -> Any:
        if target == source and method == "CancelWorkload":
            raise Crash("the console died between the move's two steps")
        return fleet.call(target, method, request)

    return call


def test_a_crash_between_the_steps_then_a_retry_leaves_one_copy(fleet: Fleet) -> None:
    queued = fleet.queue()
    with pytest.raises(Crash):
        move_workload(crash_at_cancel(fleet, fleet.a), fleet.move(queued))
    assert sorted(host for host, _ in fleet.live()) == ["node-a", "node-b"]  # cut short
    again = move_workload(fleet.call, fleet.move(queued))
    assert again.ok, again.message
    assert [(host, w.id) for host, w in fleet.live()] == [("node-b", again.new_id)]
    assert len(fleet.rows(fleet.b)) == 1  # the retry found its copy: none made twice


def test_a_crash_between_the_steps_is_finished_by_the_next_look(fleet: Fleet) -> None:
    queued = fleet.queue()
    with pytest.raises(Crash):
        move_workload(crash_at_cancel(fleet, fleet.a), fleet.move(queued))
    rows = fleet.rows(fleet.a) + fleet.rows(fleet.b)
    # Daemons without authentication record no submitter: anyone may cancel there anyway.
    repairs, conflicts = interrupted_moves(rows, fleet.hosts, open_nodes=fleet.hosts)
    assert conflicts == [] and [(r.cancel.target, r.cancel.id) for r in repairs] == [
        (fleet.a, queued.id)
    ]
    assert repairs[0].why.startswith("finishing its move to node-b/")
    assert repair_move(fleet.call, repairs[0], "alice")[0]
    assert [host for host, _ in fleet.live()] == ["node-b"]
    after = fleet.rows(fleet.a) + fleet.rows(fleet.b)
    assert interrupted_moves(after, fleet.hosts, open_nodes=fleet.hosts) == ([], [])


def test_a_source_that_started_meanwhile_keeps_running_and_the_copy_goes(fleet: Fleet) -> None:
    queued = fleet.queue()
    with pytest.raises(Crash):
        move_workload(crash_at_cancel(fleet, fleet.a), fleet.move(queued, gpus=()))
    fleet.stubs[fleet.a].AssignWorkload(
        pb.AssignWorkloadRequest(workload_id=queued.id, gpu_indices=[2], actor="alice"), timeout=5
    )
    rows = fleet.rows(fleet.a) + fleet.rows(fleet.b)
    repairs, _ = interrupted_moves(rows, fleet.hosts, open_nodes=fleet.hosts)
    assert [r.cancel.target for r in repairs] == [fleet.b]
    assert "started meanwhile" in repairs[0].why
    assert repair_move(fleet.call, repairs[0], "alice")[0]
    live = fleet.live()
    assert [(host, w.id, w.state) for host, w in live] == [
        ("node-a", queued.id, WorkloadState.RUNNING)
    ]


def cut_move_repair(fleet: Fleet, queued: WorkloadRow) -> Any:
    """The repair a console judges from what it saw between a move's two steps."""
    with pytest.raises(Crash):
        move_workload(crash_at_cancel(fleet, fleet.a), fleet.move(queued, gpus=()))
    rows = fleet.rows(fleet.a) + fleet.rows(fleet.b)
    (repair,), _ = interrupted_moves(rows, fleet.hosts, open_nodes=fleet.hosts)
    assert repair.cancel.id == queued.id and repair.cancel.target == fleet.a
    return repair


def test_a_repair_of_a_move_that_finished_meanwhile_does_nothing(fleet: Fleet) -> None:
    """The console's own move and its repairer share one worker: the repair it judged
    mid-move runs after the move cancelled the source, and must neither fail nor act."""
    queued = fleet.queue()
    repair = cut_move_repair(fleet, queued)
    finished = move_workload(fleet.call, fleet.move(queued, gpus=()))  # the move goes on
    assert finished.ok, finished.message
    assert repair_move(fleet.call, repair, "alice") is None
    assert [(host, w.id) for host, w in fleet.live()] == [("node-b", finished.new_id)]


def test_a_repair_never_cancels_a_workload_that_started_since(fleet: Fleet) -> None:
    queued = fleet.queue()
    repair = cut_move_repair(fleet, queued)  # judged while the source was queued
    fleet.stubs[fleet.a].AssignWorkload(
        pb.AssignWorkloadRequest(workload_id=queued.id, gpu_indices=[2], actor="alice"), timeout=5
    )
    assert repair_move(fleet.call, repair, "alice") is None
    running = [(h, w.id, w.state) for h, w in fleet.live() if w.state is WorkloadState.RUNNING]
    assert running == [("node-a", queued.id, WorkloadState.RUNNING)]  # its work goes on


def test_a_copy_is_kept_when_another_console_finished_the_move_first(fleet: Fleet) -> None:
    """Another console saw both copies and cancelled the original; then the start on the
    dropped GPU failed: undoing the copy now would leave the workload nowhere."""
    queued = fleet.queue()

    def call(target: str, method: str, request: Any) -> Any:
        if target == fleet.b and method == "AssignWorkload":
            cancel = pb.CancelWorkloadRequest(workload_id=queued.id, actor="ada")
            fleet.stubs[fleet.a].CancelWorkload(cancel, timeout=5)  # the other console
            raise StepFailed("UNAVAILABLE: node-b did not answer")
        return fleet.call(target, method, request)

    outcome = move_workload(call, fleet.move(queued))
    assert outcome.ok, outcome.message
    assert outcome.message.startswith(f"moved node-a/{queued.id} (sleeper) of alice to node-b/")
    assert "queued there: node-b would not start it on GPU 1" in outcome.message
    live = fleet.live()
    assert [(h, w.id, w.state) for h, w in live] == [
        ("node-b", outcome.new_id, WorkloadState.QUEUED)
    ]


def test_an_open_console_finishes_a_cut_move_by_itself(qtbot, fleet: Fleet) -> None:
    queued = fleet.queue()
    with pytest.raises(Crash):
        move_workload(crash_at_cancel(fleet, fleet.a), fleet.move(queued))
    session = ConsoleSession([fleet.a, fleet.b])
    results: list[Any] = []
    session.pump.commandFinished.connect(results.append)
    session.start()
    try:
        qtbot.waitUntil(lambda: bool(results), timeout=15_000)
        assert results[0].ok, results[0].message
        assert results[0].message.startswith(
            f"node-a: cancelled {queued.id} (sleeper): finishing its move to node-b/"
        )
        assert [h for h, _ in fleet.live()] == ["node-b"]
    finally:
        session.stop()


def test_the_console_moves_a_workload_dropped_on_another_nodes_gpu(qtbot, fleet: Fleet) -> None:
    queued = fleet.queue()
    session = ConsoleSession([fleet.a, fleet.b])
    session.start()
    try:
        for target in (fleet.a, fleet.b):
            node = session.fleet.node(target)
            qtbot.waitUntil(
                lambda node=node: node.state is LinkState.CONNECTED and bool(node.latest),
                timeout=15_000,
            )
        row = session.fleet.control.workload(fleet.a, queued.id)
        assert row is not None
        with qtbot.waitSignal(session.pump.commandFinished, timeout=15_000) as finished:
            session.control.move(row, "node-a", fleet.b, "node-b", [3])
        assert finished.args[0].ok, finished.args[0].message
        wait_for(lambda: [h for h, _ in fleet.live()] == ["node-b"], 10, "moved")
        # The copy's wait reason and the source's end reach the console's one queue.
        qtbot.waitUntil(
            lambda: (
                (w := session.fleet.control.workload(fleet.a, queued.id)) is not None
                and w.state is WorkloadState.CANCELLED
            ),
            timeout=10_000,
        )
    finally:
        session.stop()


def test_the_queue_table_reads_in_queue_order_and_says_why_each_waits(qtbot) -> None:
    fleet = fleet_with(A, B)
    first = workload("w-1")
    urgent = dataclasses.replace(
        workload("w-2", target=B), priority=10, time_limit_s=5400, held_gpu_indices=(1, 3),
        wait_reason="next in line: GPU 1, 3 held for it, waiting for 1 more GPU",
    )  # fmt: skip
    fleet.control.apply(first)
    fleet.control.apply(urgent)
    model = WorkloadTableModel(fleet)

    def cell(row: int, name: str) -> str:
        return str(model.index(row, COLUMNS.index(name)).data())

    assert [model.workload(r).id for r in range(2)] == ["w-2", "w-1"]  # priority first
    assert cell(0, "ID") == "node-2/w-2" and cell(1, "ID") == "node-1/w-1"
    assert (cell(0, "Priority"), cell(0, "Time limit")) == ("10", "1:30:00")
    assert cell(0, "On GPUs") == "held: 1, 3"
    assert cell(0, "Waiting because").startswith("next in line: GPU 1, 3 held for it")


def test_the_submit_dialog_asks_priority_and_time_limit(qtbot) -> None:
    dialog = SubmitDialog([(A, "node-1")], "alice")
    qtbot.addWidget(dialog)
    dialog.command.setText("python train.py")
    dialog.priority.setValue(7)
    dialog.time_limit.setValue(90)
    spec = dialog.spec()
    assert (spec.priority, spec.time_limit_s) == (7, 5400)
    assert dialog.time_limit.specialValueText() == "the node's default"
