"""The daemon's RPC transport under hostile and dead clients (issue #11, items 4-6).

Real daemons, real gRPC over loopback, real processes: bytes that do not parse
get INVALID_ARGUMENT without growing the daemon's memory; streams beyond
`max_streams` (or beyond a client's share) are refused with a message that
names the limit, while unary calls and health checks are still served; a
client that stops answering loses its stream within 10 s (keepalive).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from gpufleet.policy import Role
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.auth.identity import User
from node_daemon.auth.settings import AuthSettings
from node_daemon.auth.tokens import new_token, token_hash
from node_daemon.server import NodeDaemon
from tests.conftest import DaemonFactory, wait_for
from tests.daemon_process import DaemonProcess

Code = grpc.StatusCode
GARBAGE = b"\xff\xff\xff"  # field 0x1fffffff of wire type 7: no message parses it
NODE = "/gpufleet.v1.NodeService/"
HEALTH = "/grpc.health.v1.Health/"
REFLECTION = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"


def _raw(payload: bytes) -> bytes:
    return payload


def status_of(call: object) -> tuple[grpc.StatusCode, str]:
    """The status of a finished call, or of the exception it raised."""
    assert isinstance(call, grpc.RpcError), call
    return call.code(), call.details() or ""  # type: ignore[attr-defined]


def raw_unary(channel: grpc.Channel, method: str, payload: bytes) -> tuple[Code, str]:
    call = channel.unary_unary(method, request_serializer=_raw, response_deserializer=_raw)
    try:
        call(payload, timeout=10)
    except grpc.RpcError as exc:
        return status_of(exc)
    return Code.OK, ""


def raw_stream(channel: grpc.Channel, method: str, payload: bytes) -> tuple[Code, str]:
    call = channel.unary_stream(method, request_serializer=_raw, response_deserializer=_raw)
    try:
        next(iter(call(payload, timeout=10)))
    except grpc.RpcError as exc:
        return status_of(exc)
    return Code.OK, ""


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


# -- item 4: bytes that do not parse ----------------------------------------------------


@pytest.mark.parametrize(
    ("method", "streaming"),
    [
        (NODE + "GetInventory", False),
        (NODE + "AcknowledgeAlert", False),
        (NODE + "QueryUsage", False),
        (NODE + "StreamSamples", True),
        (NODE + "StreamEvents", True),
        (HEALTH + "Check", False),
        (HEALTH + "Watch", True),
    ],
)
def test_undecodable_bytes_get_invalid_argument(
    start_daemon: DaemonFactory, method: str, streaming: bool
) -> None:
    daemon = start_daemon(gpus=1)
    with grpc.insecure_channel(str(daemon.address)) as channel:
        code, details = (raw_stream if streaming else raw_unary)(channel, method, GARBAGE)
        assert code == Code.INVALID_ARGUMENT, (code, details)
        assert "the request is not a valid " in details
        assert daemon.streams.open == 0  # a refused stream holds no place
        assert_serving(channel)


def test_undecodable_reflection_requests_get_invalid_argument(start_daemon: DaemonFactory) -> None:
    daemon = start_daemon(gpus=1)
    with grpc.insecure_channel(str(daemon.address)) as channel:
        call = channel.stream_stream(
            REFLECTION, request_serializer=_raw, response_deserializer=_raw
        )
        with pytest.raises(grpc.RpcError) as raised:
            list(call(iter([GARBAGE]), timeout=10))
        code, details = status_of(raised.value)
        assert code == Code.INVALID_ARGUMENT, details
        assert "ServerReflectionRequest" in details
        wait_for(lambda: daemon.streams.open == 0, 5, "the reflection stream's place back")
        assert_serving(channel)


def assert_serving(channel: grpc.Channel) -> None:
    inventory = pb_grpc.NodeServiceStub(channel).GetInventory(pb.GetInventoryRequest(), timeout=10)
    assert inventory.gpus
    health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
    assert health.status == health_pb2.HealthCheckResponse.SERVING


def test_undecodable_bytes_are_refused_before_authentication_and_not_audited(
    start_daemon: DaemonFactory,
) -> None:
    token = new_token()
    daemon = start_daemon(
        gpus=1, auth=AuthSettings((User("ada", Role.ADMIN, (), token_hash(token)),))
    )
    with grpc.insecure_channel(str(daemon.address)) as channel:
        for method in ("KillProcess", "Reserve", "GetInventory"):
            code, details = raw_unary(channel, NODE + method, GARBAGE)
            assert code == Code.INVALID_ARGUMENT, (method, code, details)
        inventory = pb_grpc.NodeServiceStub(channel).GetInventory(
            pb.GetInventoryRequest(), metadata=(("authorization", f"Bearer {token}"),), timeout=10
        )
    assert inventory.gpus
    assert daemon.audit.query(limit=10) == []  # no code of ours ran, nothing to audit


def test_a_stream_denied_by_authentication_gives_its_place_back(
    start_daemon: DaemonFactory,
) -> None:
    user = User("ada", Role.ADMIN, (), token_hash(new_token()))
    daemon = start_daemon(gpus=1, max_streams=1, auth=AuthSettings((user,)))
    with grpc.insecure_channel(str(daemon.address)) as channel:
        stub = pb_grpc.NodeServiceStub(channel)
        for _ in range(3):  # one place only: a place kept by a denial would refuse the next
            with pytest.raises(grpc.RpcError) as denied:
                next(stub.StreamSamples(pb.StreamSamplesRequest(), timeout=10))
            assert denied.value.code() == Code.UNAUTHENTICATED, denied.value.details()
    wait_for(lambda: daemon.streams.open == 0, 5, "the denied streams' places back")


def test_undecodable_bytes_are_logged_at_most_once_a_minute(
    start_daemon: DaemonFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """gRPC's own path logged a traceback per request: a flood of garbage was a flood of
    log lines. Now one warning, then a count."""
    caplog.set_level(logging.INFO)
    daemon = start_daemon(gpus=1)
    with grpc.insecure_channel(str(daemon.address)) as channel:
        codes = {raw_unary(channel, NODE + "GetInventory", GARBAGE)[0] for _ in range(50)}
    assert codes == {Code.INVALID_ARGUMENT}
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "are not a gpufleet.v1.GetInventoryRequest" in warnings[0].getMessage()
    assert daemon.guard.undecodable.total == 50


def test_undecodable_requests_do_not_grow_the_daemons_memory(tmp_path: Path) -> None:
    """gRPC's deserializer failure path kept ~16 KB per request (10,000 requests: +160 MB).
    3,000 after a warm-up must not add 8 MB (before the fix: ~48 MB)."""
    daemon = DaemonProcess(tmp_path, "--backend", "simulated", "--gpus", "1").start()
    try:
        assert daemon.proc is not None
        with grpc.insecure_channel(daemon.address) as channel:
            hostile = [raw_unary(channel, NODE + "GetInventory", GARBAGE) for _ in range(300)]
            before = rss_kib(daemon.proc.pid)
            hostile += [raw_unary(channel, NODE + "GetInventory", GARBAGE) for _ in range(3000)]
            grown_kib = rss_kib(daemon.proc.pid) - before
            assert_serving(channel)
        assert grown_kib < 8 * 1024, f"RSS grew {grown_kib} KiB over 3,000 undecodable requests"
        assert {code for code, _ in hostile} == {Code.INVALID_ARGUMENT}
    finally:
        daemon.stop()


# -- item 5: streams must not starve everything else ------------------------------------


class Streams:
    """Sample streams opened from the test, each on a channel of its own (as consoles)."""

    def __init__(self, address: str) -> None:
        self._address = address
        self._stack = ExitStack()
        self.open: list[Iterator[object]] = []
        self.refused: list[tuple[Code, str]] = []

    def add(self, count: int) -> None:
        for _ in range(count):
            channel = self._stack.enter_context(grpc.insecure_channel(self._address))
            call = pb_grpc.NodeServiceStub(channel).StreamSamples(pb.StreamSamplesRequest())
            self._stack.callback(call.cancel)
            try:
                next(call)  # the first batch: admitted and served
            except grpc.RpcError as exc:
                self.refused.append(status_of(exc))
            else:
                self.open.append(call)

    def close(self) -> None:
        self._stack.close()


@pytest.fixture
def streams() -> Iterator[list[Streams]]:
    made: list[Streams] = []
    yield made
    for each in made:
        each.close()


def open_streams(made: list[Streams], daemon: NodeDaemon, count: int) -> Streams:
    opened = Streams(str(daemon.address))
    made.append(opened)
    opened.add(count)
    return opened


def test_streams_beyond_max_streams_are_refused_and_unary_calls_still_served(
    start_daemon: DaemonFactory, streams: list[Streams]
) -> None:
    """With more subscribers than slots, gRPC gave every worker to streams (12 of 4
    here) and refused every unary call and health check with RESOURCE_EXHAUSTED."""
    daemon = start_daemon(gpus=1, max_streams=4, max_streams_per_client=1024)
    opened = open_streams(streams, daemon, 30)
    assert len(opened.open) == 4
    assert len(opened.refused) == 26
    for code, details in opened.refused:
        assert code == Code.RESOURCE_EXHAUSTED
        assert "4 streams are open, the most this daemon serves (max_streams = 4)" in details
    with grpc.insecure_channel(str(daemon.address)) as channel:
        for _ in range(20):
            assert_serving(channel)
    assert daemon.streams.open == 4


def test_one_client_may_hold_only_its_share(
    start_daemon: DaemonFactory, streams: list[Streams]
) -> None:
    daemon = start_daemon(gpus=1, max_streams=64, max_streams_per_client=3)
    opened = open_streams(streams, daemon, 5)
    assert len(opened.open) == 3
    assert [code for code, _ in opened.refused] == [Code.RESOURCE_EXHAUSTED] * 2
    details = opened.refused[0][1]
    assert "127.0.0.1 already holds 3 streams" in details
    assert "max_streams_per_client = 3" in details
    assert daemon.streams.open_by_client() == {"127.0.0.1": 3}


def test_a_closed_stream_gives_its_place_back(
    start_daemon: DaemonFactory, streams: list[Streams]
) -> None:
    daemon = start_daemon(gpus=1, max_streams=2)
    first = open_streams(streams, daemon, 2)
    assert len(first.open) == 2
    first.close()
    wait_for(lambda: daemon.streams.open == 0, 5, "both places back")
    again = open_streams(streams, daemon, 3)
    assert (len(again.open), len(again.refused)) == (2, 1)


def test_health_watches_count_as_streams(start_daemon: DaemonFactory) -> None:
    """A watch holds no worker, but each is an open RPC: unbounded, they would take
    gRPC's whole concurrent-RPC limit. They count against max_streams."""
    daemon = start_daemon(gpus=1, max_streams=2)
    request = health_pb2.HealthCheckRequest(service="")
    with grpc.insecure_channel(str(daemon.address)) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        watches = [stub.Watch(request) for _ in range(2)]
        assert [next(w).status for w in watches] == [health_pb2.HealthCheckResponse.SERVING] * 2
        with pytest.raises(grpc.RpcError) as raised:
            next(stub.Watch(request, timeout=10))
        assert raised.value.code() == Code.RESOURCE_EXHAUSTED
        assert "max_streams = 2" in (raised.value.details() or "")
        for watch in watches:
            watch.cancel()  # type: ignore[attr-defined]
        wait_for(lambda: daemon.streams.open == 0, 5, "the watches' places back")
        assert (
            next(stub.Watch(request, timeout=10)).status == health_pb2.HealthCheckResponse.SERVING
        )


# -- item 6: a dead client must not hold its stream --------------------------------------

CLIENT = """
import sys, grpc
from gpufleet.v1 import node_pb2 as pb, node_pb2_grpc as pb_grpc
channel = grpc.insecure_channel(sys.argv[1])  # no keepalive of its own: the daemon's counts
for batch in pb_grpc.NodeServiceStub(channel).StreamSamples(pb.StreamSamplesRequest()):
    print("streaming", flush=True)
    sys.stdin.readline()  # read no further: the process is stopped from here on
"""


def test_a_stopped_clients_stream_is_freed_within_10_s(start_daemon: DaemonFactory) -> None:
    """A client that stops answering (SIGSTOP: its kernel still ACKs TCP, its gRPC answers
    no ping) held its stream and worker for over a minute: gRPC's ping timeout defaults
    to a minute whatever keepalive_timeout_ms says."""
    daemon = start_daemon(gpus=1)
    client = subprocess.Popen(
        [sys.executable, "-c", CLIENT, str(daemon.address)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=dict(os.environ),
    )  # fmt: skip
    try:
        assert client.stdout is not None
        assert client.stdout.readline() == b"streaming\n"
        assert established(daemon.port) == 1
        os.kill(client.pid, signal.SIGSTOP)
        wait_for(lambda: established(daemon.port) == 0, 10, "the daemon to drop the client")
        wait_for(lambda: daemon.streams.open == 0, 2, "the stream's place back")
    finally:
        client.kill()  # SIGKILL ends a stopped process too
        client.wait(10)
        for pipe in (client.stdin, client.stdout):
            if pipe is not None:
                pipe.close()  # wait() leaves them open: a ResourceWarning once collected


def established(port: int) -> int:
    """The daemon's TCP connections on `port` that are open (ESTABLISHED, state 01)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text(encoding="utf-8").splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            count += int(local.rpartition(":")[2], 16) == port and state == "01"
    return count
