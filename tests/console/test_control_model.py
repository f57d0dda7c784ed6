"""Reservations, workloads, drop verdicts and people, without Qt."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np
import pytest

from console.connections.decode import decode_event, decode_reply, decode_workload
from console.fleet.columns import COLUMN_COUNT, column
from console.fleet.control import ControlBook, ReservationRow, WorkloadRow
from console.fleet.control_requests import KillTarget
from console.fleet.model import Change, FleetModel
from console.fleet.people import known_people
from console.fleet.placement import can_assign, can_kill, can_reserve
from console.fleet.process_row import ProcessRow
from console.fleet.updates import (
    CommandResult,
    ControlUpdate,
    GpuSnapshot,
    KillReport,
    LinkState,
    LinkUpdate,
    SamplesUpdate,
)
from console.qt import people_model
from console.qt.people_model import PeopleListModel
from console.settings import SettingsError, load_settings
from gpufleet.states import WorkloadState
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1.gpu_metrics import (
    MEM_TOTAL_BYTES,
    MEM_USED_BYTES,
    POWER_W,
    TEMP_GPU_C,
    UTIL_GPU_PCT,
)
from tests.console.hand_fed import gpus_of, node_up, simulated_node

A, B = "10.0.0.1:50051", "10.0.0.2:50051"
GIB = 1024**3
NOW = int(time.time() * 1000)
HOUR = 3_600_000


def reservation(gpus: tuple[int, ...], holder: str, rid: str = "r-1", active: bool = True,
                target: str = A, reason: str = "paper deadline") -> ReservationRow:  # fmt: skip
    return ReservationRow(
        target=target, id=rid, gpu_indices=gpus, holder=holder, until_unix_ms=NOW + HOUR,
        reason=reason, created_by="admin", created_unix_ms=NOW - 1000,
        ended_unix_ms=None if active else NOW, active=active,
    )  # fmt: skip


def workload(wid: str = "w-1", state: WorkloadState = WorkloadState.QUEUED, owner: str = "alice",
             gpus: int = 1, memory_gib: int = 0, on: tuple[int, ...] = (),
             target: str = A) -> WorkloadRow:  # fmt: skip
    return WorkloadRow(
        target=target, id=wid, name="train", argv=("python", "train.py"), owner=owner,
        gpu_count=gpus, min_free_memory_bytes=memory_gib * GIB, auto_place=False, state=state,
        gpu_indices=on, pid=None, pid_start_unix_ms=None, queued_unix_ms=NOW - 5000,
        started_unix_ms=None, ended_unix_ms=None, exit_code=None, detail="",
    )  # fmt: skip


def report(fleet: FleetModel, target: str, index: int, used_gib: float = 10, health: str = "ok",
           processes: tuple[ProcessRow, ...] = ()) -> None:  # fmt: skip
    """GPU `index` reports a tick, through the model as from the network: 50 °C, 10 % busy,
    `used_gib` of 80 GiB used, 100 W; the node's other GPUs keep their newest values."""
    node = fleet.node(target)
    newest = node.newest()
    rows = np.full((node.gpu_count, COLUMN_COUNT), np.nan, np.float32)
    if newest is not None:
        rows[:] = newest
    for metric, value in ((TEMP_GPU_C, 50.0), (UTIL_GPU_PCT, 10.0), (MEM_USED_BYTES, used_gib),
                          (MEM_TOTAL_BYTES, 80.0), (POWER_W, 100.0)):  # fmt: skip
        rows[index, column(metric)] = value
    assert node.ring is not None
    tick = max(node.ring.last_time + 1.0, NOW / 1000)
    snapshot = GpuSnapshot(index, health, "", processes)
    assert fleet.apply(SamplesUpdate(target, tick, rows, (snapshot,), False)) is Change.DATA


def fleet_with(*targets: str, gpus: int = 4) -> FleetModel:
    fleet = FleetModel(ring_capacity=4)
    for number, target in enumerate(targets, start=1):
        fleet.add_node(target)
        info = simulated_node(f"node-{number}", gpus_of(gpus, f"GPU-{number}-"))
        fleet.apply_all(node_up(target, info))
        for i in range(gpus):
            report(fleet, target, i)
    return fleet


# -- the book ---------------------------------------------------------------------


def test_records_only_move_forward() -> None:
    book = ControlBook()
    running = workload(state=WorkloadState.RUNNING, on=(2,))
    finished = dataclasses.replace(running, state=WorkloadState.FINISHED, exit_code=0)
    assert book.apply(running) and book.running_on(A, 2) == running
    assert book.apply(finished)
    assert not book.apply(running)  # a replayed "started" after "finished": ignored
    assert book.workload(A, "w-1") == finished and book.running_on(A, 2) is None


def test_released_reservation_stays_released() -> None:
    book = ControlBook()
    made = reservation((1, 2), "bob")
    assert book.apply(made) and book.reservation_on(A, 2, NOW) == made
    assert book.apply(dataclasses.replace(made, active=False, ended_unix_ms=NOW))
    assert not book.apply(made)  # the answer to Reserve, arriving after the release
    assert book.reservation_on(A, 2, NOW) is None and book.reservations() == []


def test_listing_replaces_one_node_only() -> None:
    fleet = fleet_with(A, B)
    fleet.control.apply(reservation((0,), "bob", target=B))
    fleet.control.apply(workload("w-9"))
    fleet.apply(ControlUpdate(A, (reservation((3,), "carol"),), (workload("w-2"),)))
    assert [w.id for w in fleet.control.workloads(A)] == ["w-2"]
    assert fleet.control.reservation_on(B, 0, NOW).holder == "bob"
    assert fleet.control.reservation_on(A, 3, NOW).holder == "carol"


def test_expired_reservation_is_not_in_force() -> None:
    book = ControlBook()
    book.apply(dataclasses.replace(reservation((0,), "bob"), until_unix_ms=NOW - 1))
    assert book.reservation_on(A, 0, NOW) is None


# -- decoding and the fleet model ------------------------------------------------------


def test_event_carries_the_record_into_the_book() -> None:
    fleet = fleet_with(A)
    message = pb.Workload(id="w-4", name="sleep", argv=["sleep", "9"], owner="alice", gpu_count=1,
                          state=pb.WORKLOAD_STATE_RUNNING, gpu_indices=[3], pid=4242,
                          queued_unix_ms=NOW, started_unix_ms=NOW)  # fmt: skip
    event = pb.Event(seq=7, time_unix_ms=NOW, kind=pb.EVENT_KIND_WORKLOAD_STARTED,
                     summary="started", journal_id="j")  # fmt: skip
    event.workload.CopyFrom(message)
    update = decode_event(A, event)
    assert update.event.kind == "workload_started" and update.event.workload.pid == 4242
    fleet.apply(update)
    running = fleet.control.running_on(A, 3)
    assert running is not None and running.state is WorkloadState.RUNNING
    assert running.exit_code is None and running.ended_unix_ms is None  # unset, not 0


def test_answer_with_a_record_is_applied_at_once() -> None:
    fleet = fleet_with(A)
    reply = pb.Reservation(
        id="r-3", gpu_indices=[1], holder="team:ml", until_unix_ms=NOW + HOUR, active=True
    )
    message, payload = decode_reply(A, reply)
    fleet.apply(CommandResult(A, "reserve", True, message, payload=payload))
    assert fleet.control.reservation_on(A, 1, NOW).holder == "team:ml"


def test_kill_reply_says_the_outcome() -> None:
    reply = pb.KillProcessResponse(outcome=pb.KILL_OUTCOME_ALREADY_GONE, detail="pid 9: gone")
    message, report = decode_reply(A, reply)
    assert report == KillReport("already_gone", "pid 9: gone") and report.ended
    assert message.startswith("already gone")


def test_workload_state_decodes() -> None:
    row = decode_workload(A, pb.Workload(id="w-1", state=pb.WORKLOAD_STATE_FAILED, exit_code=1))
    assert row.state is WorkloadState.FAILED and row.state.ended and row.exit_code == 1


# -- assigning a queued workload ------------------------------------------------------


def test_free_gpu_accepts_a_queued_workload() -> None:
    fleet = fleet_with(A)
    verdict = can_assign(workload(), fleet, A, 2, NOW)
    assert verdict.ok and verdict.places == ((A, 2),)
    assert verdict.reason == "assign w-1 (train) to GPU 2 of node-1"


def test_gpu_reserved_for_someone_else_refuses() -> None:
    fleet = fleet_with(A)
    fleet.control.apply(reservation((2,), "bob"))
    verdict = can_assign(workload(owner="alice"), fleet, A, 2, NOW)
    assert not verdict.ok
    until = time.strftime("%H:%M", time.localtime((NOW + HOUR) / 1000))
    assert verdict.reason in (
        f"GPU 2 is reserved for bob until {until} (paper deadline)",
        # an hour from now may be tomorrow
        f"GPU 2 is reserved for bob until "
        f"{time.strftime('%b %d %H:%M', time.localtime((NOW + HOUR) / 1000))} (paper deadline)",
    )
    assert can_assign(workload(owner="bob"), fleet, A, 2, NOW).ok  # the holder's own


def test_team_reservation_is_left_to_the_node() -> None:
    fleet = fleet_with(A)
    fleet.control.apply(reservation((2,), "team:ml"))
    verdict = can_assign(workload(owner="alice"), fleet, A, 2, NOW)
    assert verdict.ok and "the node accepts it if alice is a member" in verdict.reason


def test_not_enough_free_memory() -> None:
    fleet = fleet_with(A)
    report(fleet, A, 1, used_gib=68)
    verdict = can_assign(workload(memory_gib=40), fleet, A, 1, NOW)
    assert not verdict.ok
    assert verdict.reason == "GPU 1: not enough free memory: 12 GiB free, 40 GiB needed"


def test_lost_busy_and_foreign_gpus_refuse() -> None:
    fleet = fleet_with(A, B)
    report(fleet, A, 3, health="lost")
    fleet.control.apply(workload("w-3", WorkloadState.RUNNING, on=(0,)))
    assert can_assign(workload(), fleet, A, 3, NOW).reason == "GPU 3 is lost"
    assert (
        can_assign(workload(), fleet, A, 0, NOW).reason == "GPU 0 is busy with workload w-3 (train)"
    )
    report(fleet, B, 2, health="lost")
    assert can_assign(workload(), fleet, B, 2, NOW).reason == "GPU 2 is lost"  # the target's
    running = can_assign(workload(state=WorkloadState.RUNNING), fleet, A, 1, NOW)
    assert running.reason == "w-1 (train) is running, not queued"
    fleet.apply(LinkUpdate(A, LinkState.RECONNECTING))
    assert can_assign(workload(), fleet, A, 1, NOW).reason == "node-1 is reconnecting"


def test_dropped_on_another_nodes_gpus_it_moves_there() -> None:
    fleet = fleet_with(A, B)
    fleet.control.apply(workload("w-9", WorkloadState.RUNNING, on=(1,), target=B))
    verdict = can_assign(workload(gpus=2), fleet, B, 0, NOW)
    assert verdict.ok, verdict.reason
    assert verdict.reason == "move w-1 (train) from node-1 to GPUs 0, 2 of node-2"
    assert verdict.places == ((B, 0), (B, 2))  # GPU 1 of node-2 runs w-9
    fleet.apply(LinkUpdate(A, LinkState.RECONNECTING))
    refused = can_assign(workload(), fleet, B, 0, NOW)
    assert refused.reason == "w-1 (train) cannot move: node-1 is reconnecting"


def test_multi_gpu_takes_the_hovered_and_the_next_free() -> None:
    fleet = fleet_with(A)
    fleet.control.apply(reservation((3,), "bob"))
    verdict = can_assign(workload(gpus=2), fleet, A, 2, NOW)
    assert verdict.ok and verdict.places == ((A, 2), (A, 0))  # 3 is bob's: wraps to 0
    too_many = can_assign(workload(gpus=4), fleet, A, 2, NOW)
    assert not too_many.ok and "needs 4 GPUs; only 3 can take it" in too_many.reason


def test_multi_gpu_uses_the_selection_when_it_fits() -> None:
    fleet = fleet_with(A)
    selection = {(A, 1), (A, 3)}
    assert can_assign(workload(gpus=2), fleet, A, 3, NOW, selection).places == ((A, 1), (A, 3))
    # Hovering outside the selection: the selection does not apply.
    assert can_assign(workload(gpus=2), fleet, A, 0, NOW, selection).places == ((A, 0), (A, 1))


# -- reserving ---------------------------------------------------------------------------


def test_reserve_the_selection_across_nodes() -> None:
    fleet = fleet_with(A, B)
    selection = {(A, 0), (A, 1), (B, 2)}
    verdict = can_reserve("team:ml", fleet, A, 1, NOW, selection)
    assert verdict.ok and verdict.gpus_by_node() == {A: (0, 1), B: (2,)}
    assert verdict.reason == "reserve GPUs 0, 1 of node-1; GPU 2 of node-2 for team:ml"
    single = can_reserve("bob", fleet, A, 3, NOW, selection)  # not on a selected tile
    assert single.places == ((A, 3),)


def test_reserve_refuses_a_gpu_held_by_another() -> None:
    fleet = fleet_with(A)
    fleet.control.apply(reservation((1,), "bob"))
    verdict = can_reserve("carol", fleet, A, 1, NOW)
    assert not verdict.ok and verdict.reason.startswith(
        "GPU 1 of node-1 is already reserved for bob"
    )
    assert can_reserve("bob", fleet, A, 1, NOW).ok  # the node lets bob extend his own


# -- killing ------------------------------------------------------------------------------


def test_kill_verdicts() -> None:
    fleet = fleet_with(A)
    process = ProcessRow(4242, "alice", "sleep 300", GIB, NOW - 1000, None, None)
    report(fleet, A, 2, processes=(process,))
    assert can_kill(KillTarget(A, "node-1", 2, process), fleet).reason == (
        "kill pid 4242 (alice: sleep 300) on node-1 GPU 2"
    )
    no_start = dataclasses.replace(process, start_time_unix_ms=None)
    assert "no start time" in can_kill(KillTarget(A, "node-1", 2, no_start), fleet).reason
    gone = can_kill(KillTarget(A, "node-1", 1, process), fleet)
    assert not gone.ok and gone.reason == "pid 4242 is no longer on GPU 1"


# -- people and words ---------------------------------------------------------------------


def test_people_from_settings_and_fleet() -> None:
    fleet = fleet_with(A)
    fleet.control.apply(reservation((1,), "team:vision"))
    fleet.control.apply(workload(owner="dmitri"))
    report(fleet, A, 0, processes=(ProcessRow(1, "erin", "x", None, None, None, None),))
    people = known_people(["alice", "team:ml", "erin"], fleet)
    assert [p.name for p in people] == ["team:ml", "team:vision", "alice", "dmitri", "erin"]
    assert next(p for p in people if p.name == "erin").sources == ("settings", "processes")


def test_the_people_list_looks_again_only_at_the_nodes_that_changed(qtbot, monkeypatch) -> None:
    """A frame's changed nodes have their process users looked at again; the others'
    are kept (the whole fleet's processes at once took 26 ms of a frame at 10,000 GPUs)."""
    monkeypatch.setattr(people_model, "REFRESH_S", 0.0)
    fleet = fleet_with(A, B)
    report(fleet, A, 0, processes=(ProcessRow(1, "erin", "x", None, None, None, None),))
    report(fleet, B, 0, processes=(ProcessRow(2, "frank", "y", None, None, None, None),))
    model = PeopleListModel(fleet)
    assert [model.person(r).name for r in range(model.rowCount())] == ["erin", "frank"]
    report(fleet, A, 0, processes=(ProcessRow(3, "zoe", "z", None, None, None, None),))
    report(fleet, B, 0, processes=())  # frank's process ended, but B is not said changed
    model.on_fleet_changed({A: Change.DATA})
    assert [model.person(r).name for r in range(model.rowCount())] == ["frank", "zoe"]
    model.on_fleet_changed({B: Change.DATA})
    assert [model.person(r).name for r in range(model.rowCount())] == ["zoe"]


def test_settings_people(tmp_path: Path) -> None:
    path = tmp_path / "console.toml"
    path.write_text('nodes = ["a:1"]\npeople = ["alice", "team:ml"]\n')
    assert load_settings(path).people == ("alice", "team:ml")
    path.write_text("people = [1]\n")
    with pytest.raises(SettingsError, match="'people' must be a list"):
        load_settings(path)
