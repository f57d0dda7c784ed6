"""Releasing some GPUs of a reservation, against a real daemon over gRPC.

ReleaseReservationRequest.gpu_indices: only those GPUs are released, the others
stay reserved under the same id; what the caller is told is what is stored
(across a restart too), the audit record names the GPUs, and an event tells
every console.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from gpufleet.policy import LOCAL_USER
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.server import NodeDaemon
from tests.conftest import DaemonFactory

Node = tuple[NodeDaemon, pb_grpc.NodeServiceStub]


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def node(start_daemon: DaemonFactory, state_dir: Path) -> Iterator[Node]:
    daemon = start_daemon(gpus=4, seed=2, state_dir=state_dir)
    with grpc.insecure_channel(str(daemon.address)) as channel:
        yield daemon, pb_grpc.NodeServiceStub(channel)


def _reserve(
    stub: pb_grpc.NodeServiceStub, gpus: list[int], holder: str = "alice"
) -> pb.Reservation:
    until = int((time.time() + 3600) * 1000)
    request = pb.ReserveRequest(gpu_indices=gpus, holder=holder, until_unix_ms=until,
                                reason="paper deadline")  # fmt: skip
    return stub.Reserve(request, timeout=5)


def _release(stub: pb_grpc.NodeServiceStub, reservation_id: str, *gpus: int) -> pb.Reservation:
    request = pb.ReleaseReservationRequest(reservation_id=reservation_id, gpu_indices=list(gpus))
    return stub.ReleaseReservation(request, timeout=5)


def _listed(stub: pb_grpc.NodeServiceStub) -> dict[str, pb.Reservation]:
    reply = stub.ListReservations(pb.ListReservationsRequest(include_ended=True), timeout=5)
    return {r.id: r for r in reply.reservations}


def test_some_gpus_released_the_rest_stay_under_the_same_id(node: Node) -> None:
    _, stub = node
    held = _reserve(stub, [0, 1, 2])

    reply = _release(stub, held.id, 1)

    assert (reply.id, list(reply.gpu_indices), reply.active) == (held.id, [0, 2], True)
    assert not reply.HasField("ended_unix_ms")
    assert (reply.holder, reply.reason, reply.until_unix_ms) == (
        held.holder, held.reason, held.until_unix_ms
    )  # fmt: skip
    assert _listed(stub) == {held.id: reply}  # told = stored
    # GPU 1 is free for someone else; GPU 0 is still alice's.
    assert list(_reserve(stub, [1], holder="bob").gpu_indices) == [1]
    with pytest.raises(grpc.RpcError) as info:
        _reserve(stub, [0], holder="bob")
    assert "GPU 0 is reserved for alice" in (info.value.details() or "")


def test_releasing_every_gpu_it_holds_ends_it(node: Node) -> None:
    _, stub = node
    held = _reserve(stub, [2, 3])
    _release(stub, held.id, 3)

    ended = _release(stub, held.id, 2)

    assert not ended.active and ended.HasField("ended_unix_ms")
    assert list(ended.gpu_indices) == [2]  # what it held when it ended
    assert stub.ListReservations(pb.ListReservationsRequest(), timeout=5).reservations == []


def test_a_gpu_it_does_not_hold_is_invalid_and_changes_nothing(node: Node) -> None:
    _, stub = node
    held = _reserve(stub, [0, 1])

    with pytest.raises(grpc.RpcError) as info:
        _release(stub, held.id, 1, 3)

    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert f"reservation {held.id} does not hold GPU 3 (it holds GPU 0, 1)" in (
        info.value.details() or ""
    )
    assert list(_listed(stub)[held.id].gpu_indices) == [0, 1]
    assert _release(stub, held.id).active is False  # the daemon serves on; empty = whole


def test_the_event_tells_every_console_and_the_audit_names_the_gpus(node: Node) -> None:
    daemon, stub = node
    held = _reserve(stub, [0, 1, 2])
    _release(stub, held.id, 0, 2)

    # Another console, on its own channel, reading the event stream from the start.
    with grpc.insecure_channel(str(daemon.address)) as channel:
        events = pb_grpc.NodeServiceStub(channel).StreamEvents(
            pb.StreamEventsRequest(after_seq=0), timeout=10
        )
        released = next(e for e in events if e.kind == pb.EVENT_KIND_RESERVATION_RELEASED)
        events.cancel()
    assert released.reservation.id == held.id and released.reservation.active
    assert list(released.reservation.gpu_indices) == [1]
    assert released.actor == LOCAL_USER
    assert released.summary.startswith(
        f"GPU 0, 2 released by {LOCAL_USER}; GPU 1 reserved for alice"
    )

    audit = stub.QueryAudit(pb.QueryAuditRequest(method="ReleaseReservation"), timeout=5)
    (record,) = [r for r in audit.records if r.result == "OK"]
    assert f"reservation_id={held.id}" in record.target and "gpu_indices=[0, 2]" in record.target


def test_a_partial_release_survives_a_restart(
    node: Node, start_daemon: DaemonFactory, state_dir: Path
) -> None:
    daemon, stub = node
    held = _reserve(stub, [0, 1, 2, 3])
    told = _release(stub, held.id, 3, 0)
    daemon.stop(grace_s=0.5)

    again = start_daemon(gpus=4, seed=2, state_dir=state_dir)
    with grpc.insecure_channel(str(again.address)) as channel:
        stub = pb_grpc.NodeServiceStub(channel)
        assert _listed(stub) == {held.id: told}
        assert list(told.gpu_indices) == [1, 2]
        assert again.reservations.holder_of(0) is None
        assert again.reservations.holder_of(1) is not None
        assert _reserve(stub, [0, 3], holder="bob").id != held.id  # ids go on
