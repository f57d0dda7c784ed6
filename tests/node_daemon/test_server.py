"""The daemon over real gRPC on loopback, through the generated stub."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.backends.base import BackendUnavailable
from node_daemon.backends.readings import NodeFacts
from node_daemon.backends.simulated import SimulatedBackend
from tests.conftest import DaemonFactory, wait_for


@pytest.fixture
def channel_to() -> Iterator:
    channels: list[grpc.Channel] = []

    def open_channel(daemon: object) -> grpc.Channel:
        channel = grpc.insecure_channel(str(daemon.address))  # type: ignore[attr-defined]
        channels.append(channel)
        return channel

    yield open_channel
    for channel in channels:
        channel.close()


def take(stream: Iterator[pb.SampleBatch], count: int) -> list[pb.SampleBatch]:
    batches = [next(stream) for _ in range(count)]
    stream.cancel()  # type: ignore[attr-defined]
    return batches


def test_inventory_describes_node_and_gpus(start_daemon: DaemonFactory, channel_to) -> None:
    daemon = start_daemon(gpus=4, seed=7, model="a100", hostname="node-a")
    stub = pb_grpc.NodeServiceStub(channel_to(daemon))
    wait_for(lambda: daemon.sampler.status.ok, what="backend open")
    inventory = stub.GetInventory(pb.GetInventoryRequest(), timeout=5)
    assert inventory.hostname == "node-a"
    assert inventory.backend == pb.BACKEND_SIMULATED
    assert inventory.backend_state == pb.BACKEND_STATE_OK
    assert inventory.sample_interval_ms == 100
    assert inventory.history_seconds >= 3600
    assert [g.index for g in inventory.gpus] == [0, 1, 2, 3]
    gpu = inventory.gpus[0]
    assert gpu.name == "NVIDIA A100-SXM4-40GB"
    assert gpu.memory_total_bytes == 40 * 1024**3
    assert gpu.power_limit_w == 400.0
    assert gpu.uuid.startswith("GPU-") and gpu.HasField("pci_bus_id")


def test_live_stream_one_batch_per_tick_for_all_gpus(start_daemon, channel_to) -> None:
    daemon = start_daemon(gpus=3, model="h100")
    stub = pb_grpc.NodeServiceStub(channel_to(daemon))
    batches = take(stub.StreamSamples(pb.StreamSamplesRequest(), timeout=10), 5)
    ticks = [b.tick for b in batches]
    assert ticks == list(range(ticks[0], ticks[0] + 5))
    assert not any(b.replayed for b in batches)
    for batch in batches:
        assert [s.index for s in batch.gpus] == [0, 1, 2]
        sample = batch.gpus[0]
        assert sample.HasField("temp_gpu_c") and sample.HasField("power_w")
        # H100 SXM has no fan: the field is unset, never -1 or 0.
        assert not sample.HasField("fan_pct")


def test_since_replays_history_then_goes_live_without_gaps(start_daemon, channel_to) -> None:
    daemon = start_daemon(gpus=2)
    wait_for(lambda: len(daemon.history) >= 10, what="10 ticks of history")
    first, _ = daemon.history.since(0)
    since = first[2].timestamp_unix_ms
    stub = pb_grpc.NodeServiceStub(channel_to(daemon))
    stream = stub.StreamSamples(pb.StreamSamplesRequest(since_unix_ms=since), timeout=10)
    batches = take(stream, 15)
    ticks = [b.tick for b in batches]
    assert ticks[0] == first[3].tick  # starts right after `since`
    assert ticks == list(range(ticks[0], ticks[0] + 15))  # no gap, no duplicate
    replayed = [b.replayed for b in batches]
    assert replayed[0] and not replayed[-1]
    assert replayed == sorted(replayed, reverse=True)  # replay first, then live


def test_processes_travel_with_samples(start_daemon, channel_to) -> None:
    daemon = start_daemon(gpus=8, seed=0)
    stub = pb_grpc.NodeServiceStub(channel_to(daemon))
    batch = take(stub.StreamSamples(pb.StreamSamplesRequest(), timeout=10), 1)[0]
    busy = [s for s in batch.gpus if s.processes]
    assert busy, "seed 0 puts work on some GPUs"
    process = busy[0].processes[0]
    assert process.pid > 0 and process.HasField("user") and process.HasField("command")
    assert busy[0].mem_used_bytes >= process.gpu_memory_bytes


def test_many_subscribers_share_one_sweep(start_daemon, channel_to) -> None:
    daemon = start_daemon(gpus=2)
    stub = pb_grpc.NodeServiceStub(channel_to(daemon))
    results: list[list[tuple[int, int]]] = []
    lock = threading.Lock()

    def subscribe() -> None:
        batches = take(stub.StreamSamples(pb.StreamSamplesRequest(), timeout=10), 6)
        with lock:
            results.append([(b.tick, b.timestamp_unix_ms) for b in batches])

    threads = [threading.Thread(target=subscribe) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(15)
    assert len(results) == 10
    common = set.intersection(*(set(r) for r in results))
    # Every subscriber saw the same (tick, time) pairs: one sweep, served to all.
    assert len(common) >= 3


def test_health_serving(start_daemon, channel_to) -> None:
    daemon = start_daemon()
    health = health_pb2_grpc.HealthStub(channel_to(daemon))
    wait_for(lambda: daemon.sampler.status.ok)
    for service in ("", "gpufleet.v1.NodeService"):
        reply = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING


class FlakyBackend(SimulatedBackend):
    """A simulated node whose 'driver' is missing until `driver_loaded` is set."""

    def __init__(self) -> None:
        super().__init__(gpu_count=2)
        self.driver_loaded = threading.Event()

    def open(self) -> NodeFacts:
        if not self.driver_loaded.is_set():
            raise BackendUnavailable("NVIDIA driver not loaded (test)")
        return super().open()


def test_degraded_backend_keeps_serving_and_recovers(start_daemon, channel_to, monkeypatch) -> None:
    monkeypatch.setattr("node_daemon.sampling.sampler.RETRY_FIRST_S", 0.05)
    backend = FlakyBackend()
    daemon = start_daemon(backend=backend)
    channel = channel_to(daemon)
    stub, health = pb_grpc.NodeServiceStub(channel), health_pb2_grpc.HealthStub(channel)
    inventory = stub.GetInventory(pb.GetInventoryRequest(), timeout=5)
    assert inventory.backend_state == pb.BACKEND_STATE_DEGRADED
    assert "driver not loaded" in inventory.backend_detail
    assert not inventory.gpus
    reply = health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
    assert reply.status == health_pb2.HealthCheckResponse.NOT_SERVING
    backend.driver_loaded.set()
    wait_for(lambda: daemon.sampler.status.ok, what="recovery after the driver loads")
    inventory = stub.GetInventory(pb.GetInventoryRequest(), timeout=5)
    assert inventory.backend_state == pb.BACKEND_STATE_OK and len(inventory.gpus) == 2
    reply = health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_stop_ends_open_streams_promptly(start_daemon, channel_to) -> None:
    daemon = start_daemon()
    stream = pb_grpc.NodeServiceStub(channel_to(daemon)).StreamSamples(
        pb.StreamSamplesRequest(), timeout=30
    )
    next(stream)
    daemon.stop(grace_s=0.5)
    # The stream ends (cleanly, or cut at the grace) long before its 30 s deadline.
    try:
        for _ in stream:
            pass
    except grpc.RpcError as exc:
        assert exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)
    assert stream.code() in (  # type: ignore[attr-defined]
        grpc.StatusCode.OK,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.CANCELLED,
    )
