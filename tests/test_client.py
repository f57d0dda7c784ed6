"""The shared client (gpufleet.client): its blocking and async faces against real daemons.

Real gRPC on loopback: in-process daemons (tests/conftest.py's start_daemon) and
one daemon process (tests/daemon_process.py). The hostile peers are real too: a
port nobody listens on, a gRPC server that answers bytes no gpufleet message
parses from, and a TCP peer that does not speak HTTP/2 at all.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from gpufleet.client import calls
from gpufleet.client.aio import AsyncNodeClient
from gpufleet.client.blocking import NodeClient
from gpufleet.client.errors import CallError
from gpufleet.client.security import LinkSecurity
from gpufleet.client.submit_command import add_submit_command
from gpufleet.client.words import enum_word, known_word, severity_name
from gpufleet.policy import Role
from gpufleet.v1 import node_pb2 as pb
from node_daemon.auth.identity import User
from node_daemon.auth.settings import AuthSettings, TlsSettings
from node_daemon.auth.tokens import new_token, token_hash
from tests.certs import Authority, write
from tests.conftest import DaemonFactory, wait_for
from tests.daemon_process import DaemonProcess

OTTO = new_token()
USERS = (User("otto", Role.OPERATOR, ("ml",), token_hash(OTTO)),)
GARBAGE = b"\xff\xff\xff\xff"  # field 31, wire type 7: no message parses from it


def test_the_call_table_is_the_service() -> None:
    """Every NodeService method is in the table once, with its messages and its kind."""
    service = pb.DESCRIPTOR.services_by_name["NodeService"]
    table = {**calls.UNARY, **calls.STREAMS}
    assert set(table) == {m.name for m in service.methods}
    for method in service.methods:
        entry = table[method.name]
        assert entry.request.DESCRIPTOR is method.input_type, method.name
        assert entry.response.DESCRIPTOR is method.output_type, method.name
        assert (method.name in calls.STREAMS) == method.server_streaming, method.name


def test_plain_values_read_as_words() -> None:
    assert [severity_name(v) for v in (0, 1, 2, 3, 9)] == [
        "unknown", "info", "warning", "critical", "unknown",
    ]  # fmt: skip
    assert enum_word(pb.GpuHealthState, pb.GPU_HEALTH_STATE_NEEDS_RESET) == "needs_reset"
    assert enum_word(pb.KillOutcome, 0) == "unspecified"
    assert known_word(pb.GpuHealth, 0) == "unknown"
    assert enum_word(pb.WorkloadState, 99) == "unknown"  # a newer daemon's value: no crash


def test_blocking_face_with_a_token(start_daemon: DaemonFactory) -> None:
    daemon = start_daemon(gpus=2, hostname="client-a", auth=AuthSettings(USERS))
    address = f"127.0.0.1:{daemon.port}"
    with NodeClient(address, LinkSecurity(token=OTTO)) as client:
        assert client.call(calls.GET_INVENTORY).hostname == "client-a"
        assert client.call(calls.WHO_AM_I).user == "otto"
        batch = next(b for b in client.stream(calls.STREAM_SAMPLES, deadline_s=10) if b.gpus)
        assert len(batch.gpus) == 2
        refused = _raised(lambda: client.call(calls.DRAIN_GPU, gpu_index=7, drain=True,
                                              reason="test"))  # fmt: skip
        assert refused.code != grpc.StatusCode.OK and not refused.unreachable
        assert address in str(refused) and "DrainGpu" in str(refused)
    with NodeClient(address) as anonymous:
        denied = _raised(lambda: anonymous.call(calls.GET_INVENTORY))
    assert denied.code == grpc.StatusCode.UNAUTHENTICATED
    assert denied.reason.startswith("UNAUTHENTICATED: ") and address in str(denied)


def test_async_face_with_a_token(start_daemon: DaemonFactory) -> None:
    daemon = start_daemon(gpus=2, hostname="client-b", auth=AuthSettings(USERS))
    address = f"127.0.0.1:{daemon.port}"

    async def talk() -> tuple[str, str, int, CallError]:
        async with AsyncNodeClient(address, LinkSecurity(token=OTTO)) as client:
            inventory = await client.call(calls.GET_INVENTORY)
            caller = await client.call(calls.WHO_AM_I)
            async for batch in client.stream(calls.STREAM_SAMPLES):
                if batch.gpus:
                    break
        async with AsyncNodeClient(address, LinkSecurity(token="not-a-token")) as wrong:
            try:
                await wrong.call(calls.LIST_ALERTS)
            except CallError as exc:
                return inventory.hostname, caller.user, len(batch.gpus), exc
        raise AssertionError("a wrong token was taken")

    host, user, gpus, denied = asyncio.run(talk())
    assert (host, user, gpus) == ("client-b", "otto", 2)
    assert denied.code == grpc.StatusCode.UNAUTHENTICATED and address in str(denied)


def test_both_faces_over_tls(start_daemon: DaemonFactory, tmp_path: Path) -> None:
    authority = Authority()
    cert, key = write(tmp_path, "server", authority.issue("localhost", server=True))
    daemon = start_daemon(gpus=1, hostname="client-tls",
                          auth=AuthSettings(USERS, TlsSettings(cert, key, None)))  # fmt: skip
    security = LinkSecurity(token=OTTO, root_ca=authority.pem)
    address = f"localhost:{daemon.port}"
    with NodeClient(address, security) as client:
        assert client.call(calls.WHO_AM_I).user == "otto"

    async def who() -> str:
        async with AsyncNodeClient(address, security) as client:
            return (await client.call(calls.WHO_AM_I)).user

    assert asyncio.run(who()) == "otto"


def test_a_daemon_process_that_dies_is_unreachable_by_its_address(tmp_path: Path) -> None:
    daemon = DaemonProcess(tmp_path, "--backend", "simulated", "--gpus", "1").start()
    try:
        with NodeClient(daemon.address) as client:
            assert len(client.call(calls.GET_INVENTORY).gpus) == 1
            daemon.stop()
            gone = _raised(lambda: client.call(calls.GET_INVENTORY, deadline_s=2))
    finally:
        daemon.stop()
    assert gone.unreachable and str(gone).startswith(f"{daemon.address}: GetInventory: ")


def test_an_unreachable_address_is_named(closed_port: str) -> None:
    with NodeClient(closed_port) as client:
        blocking = _raised(lambda: client.call(calls.GET_INVENTORY, deadline_s=2))

    async def dial() -> CallError:
        async with AsyncNodeClient(closed_port) as client:
            try:
                await client.call(calls.GET_INVENTORY, deadline_s=2)
            except CallError as exc:
                return exc
        raise AssertionError("a closed port answered")

    for failed in (blocking, asyncio.run(dial())):
        assert failed.unreachable and failed.address == closed_port
        assert str(failed).startswith(f"{closed_port}: GetInventory: ")


def test_a_peer_that_answers_garbage_is_named(garbage_server: str) -> None:
    with NodeClient(garbage_server) as client:
        blocking = _raised(lambda: client.call(calls.GET_INVENTORY))
        streamed = _raised(lambda: next(iter(client.stream(calls.STREAM_SAMPLES, deadline_s=5))))

    async def ask() -> CallError:
        async with AsyncNodeClient(garbage_server) as client:
            try:
                await client.call(calls.LIST_ALERTS)
            except CallError as exc:
                return exc
        raise AssertionError("garbage parsed")

    wanted = {
        "GetInventory": "gpufleet.v1.Inventory",
        "StreamSamples": "gpufleet.v1.SampleBatch",
        "ListAlerts": "gpufleet.v1.ListAlertsResponse",
    }
    for failed in (blocking, streamed, asyncio.run(ask())):
        assert failed.code == grpc.StatusCode.INTERNAL and not failed.unreachable
        assert failed.details == (
            f"the answer to {failed.method} is not a {wanted[failed.method]} "
            f"(is {garbage_server} a gpufleet node daemon?)"
        )


def test_a_peer_that_does_not_speak_grpc_is_named(junk_tcp_peer: str) -> None:
    with NodeClient(junk_tcp_peer) as client:
        failed = _raised(lambda: client.call(calls.GET_INVENTORY, deadline_s=3))
    assert failed.unreachable and str(failed).startswith(f"{junk_tcp_peer}: GetInventory: ")


def test_the_daemon_only_submit_command(
    start_daemon: DaemonFactory, closed_port: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`gpufleet submit --node HOST:PORT` of a daemon-only install, over the blocking face."""
    daemon = start_daemon(gpus=2, hostname="client-s")
    address = f"127.0.0.1:{daemon.port}"
    parser = argparse.ArgumentParser(prog="gpufleet")
    add_submit_command(parser.add_subparsers(dest="command", required=True))

    def submit(*argv: str) -> tuple[int, str, str]:
        args = parser.parse_args(["submit", *argv])
        code = args.run(args)
        out, err = capsys.readouterr()
        return code, out, err

    code, out, err = submit("--node", address, "--owner", "nobody", "--", "true")
    assert code == 0, err
    assert out.split()[1:] == ["queued"]
    queued = out.split()[0]
    with NodeClient(address) as client:
        listed = client.call(calls.LIST_WORKLOADS, include_ended=True).workloads
    assert [w.id for w in listed] == [queued]
    code, _, err = submit("--node", address, "--owner", "nobody", "--assign", "7", "--", "true")
    assert code == 1 and err.startswith("gpufleet submit: ") and "no GPU 7" in err
    code, _, err = submit("--node", closed_port, "--", "true")
    assert code == 1 and err.startswith("gpufleet submit: UNAVAILABLE: ")


# -- hostile peers ----------------------------------------------------------------------


@pytest.fixture
def closed_port() -> Iterator[str]:
    """HOST:PORT of a port held bound but never listened on: connections are refused."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{held.getsockname()[1]}"


class _Garbage(grpc.GenericRpcHandler):
    """Answers every method, unary or stream, with bytes that are no protobuf message."""

    def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        if details.method.endswith("/StreamSamples"):
            return grpc.unary_stream_rpc_method_handler(lambda _req, _ctx: iter([GARBAGE]))
        return grpc.unary_unary_rpc_method_handler(lambda _req, _ctx: GARBAGE)


@pytest.fixture
def garbage_server() -> Iterator[str]:
    server = grpc.server(futures.ThreadPoolExecutor(2, "garbage"), handlers=[_Garbage()])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}"
    server.stop(None).wait(5)


@pytest.fixture
def junk_tcp_peer() -> Iterator[str]:
    """A TCP peer that writes an HTTP/1 answer to whatever connects, then hangs up."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                peer, _ = listener.accept()
                with peer:
                    peer.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    thread = threading.Thread(target=serve, name="junk-tcp-peer", daemon=True)
    thread.start()
    yield f"127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join(5)
    listener.close()
    wait_for(lambda: not thread.is_alive(), 5, "the junk peer to stop")


def _raised(call: object) -> CallError:
    try:
        call()  # type: ignore[operator]
    except CallError as exc:
        return exc
    raise AssertionError("the call succeeded")
