"""`gpufleet daemon --backend nvml` (and `auto`, the default) end to end: a real daemon
process, the real nvidia-ml-py ctypes path, the fake libnvidia-ml.so.1 (or one that
cannot load), a real gRPC client."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from tests.conftest import wait_for
from tests.fake_nvml.fixture import FakeNvmlState

NVML = ("--backend", "nvml")
AUTO = ()  # no --backend at all: the default, auto


class NvmlDaemon:
    """`gpufleet daemon` finding libnvidia-ml.so.1 in `lib_dir` (the fake's by default)."""

    def __init__(
        self,
        state: FakeNvmlState | None,
        tmp_path: Path,
        backend_args: Sequence[str] = NVML,
        lib_dir: Path | None = None,
    ) -> None:
        self.ready = tmp_path / "ready"
        env = {**os.environ, "LD_LIBRARY_PATH": str(lib_dir or (state and state.lib_dir))}
        if state is not None:
            env["FAKE_NVML_STATE"] = str(state.path)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "node_daemon", "daemon", *backend_args,
             "--listen", "127.0.0.1:0", "--interval", "0.1", "--ready-file", str(self.ready),
             "--state-dir", str(tmp_path / "state")],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        wait_for(self.ready.exists, 30, "the daemon's ready file")
        self.channel = grpc.insecure_channel(self.ready.read_text().strip())
        self.stub = pb_grpc.NodeServiceStub(self.channel)
        self.health = health_pb2_grpc.HealthStub(self.channel)

    def inventory(self) -> pb.Inventory:
        return self.stub.GetInventory(pb.GetInventoryRequest(), timeout=5)

    def serving(self) -> bool:
        reply = self.health.Check(health_pb2.HealthCheckRequest(), timeout=5)
        return reply.status == health_pb2.HealthCheckResponse.SERVING

    def batches(self) -> Iterator[pb.SampleBatch]:
        return self.stub.StreamSamples(pb.StreamSamplesRequest(), timeout=20)

    def stop(self) -> str:
        self.channel.close()
        os.kill(self.proc.pid, signal.SIGTERM)
        try:
            output, _ = self.proc.communicate(timeout=15)
        finally:
            self.proc.kill()
        return output


def first(stream: Iterator[pb.SampleBatch], predicate) -> pb.SampleBatch:  # type: ignore[no-untyped-def]
    for batch in stream:
        if predicate(batch):
            return batch
    raise AssertionError("stream ended before the expected batch")


def test_serves_what_nvml_reports_and_survives_a_lost_gpu(
    fake_nvml: FakeNvmlState, tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    fake_nvml.set(gpu_count=2, driver_version="550.54.15", cuda_version=12040)
    fake_nvml.set_gpu(0, name="NVIDIA H100 80GB HBM3", temp=55, util_gpu=40)
    fake_nvml.set_gpu(1, name="NVIDIA H100 80GB HBM3", temp=61, util_gpu=90)
    fake_nvml.add_process(0, sleeper.pid, 2 * 1024**3)
    daemon = NvmlDaemon(fake_nvml, tmp_path)
    try:
        inventory = daemon.stub.GetInventory(pb.GetInventoryRequest(), timeout=5)
        assert inventory.backend == pb.BACKEND_NVML
        assert inventory.driver_version == "550.54.15" and inventory.cuda_version == "12.4"
        assert [g.name for g in inventory.gpus] == ["NVIDIA H100 80GB HBM3"] * 2

        stream = daemon.batches()
        batch = first(stream, lambda b: b.gpus[0].processes)
        assert [s.temp_gpu_c for s in batch.gpus] == [55.0, 61.0]
        assert [s.util_gpu_pct for s in batch.gpus] == [40.0, 90.0]
        process = batch.gpus[0].processes[0]
        assert process.pid == sleeper.pid and process.gpu_memory_bytes == 2 * 1024**3
        assert process.command == "sleep 300"

        fake_nvml.lose_gpu(1)
        batch = first(stream, lambda b: b.gpus[1].health == pb.GPU_HEALTH_LOST)
        assert not batch.gpus[1].HasField("temp_gpu_c")
        assert batch.gpus[0].health == pb.GPU_HEALTH_OK and batch.gpus[0].temp_gpu_c == 55.0

        fake_nvml.set_gpu(0, temp=71)  # the daemon keeps sampling the survivor
        first(stream, lambda b: b.gpus[0].temp_gpu_c == 71.0)
        fake_nvml.recover_gpu(1)
        batch = first(stream, lambda b: b.gpus[1].health == pb.GPU_HEALTH_OK)
        assert batch.gpus[1].temp_gpu_c == 61.0
        stream.cancel()
    finally:
        output = daemon.stop()
    assert daemon.proc.returncode == 0, output


def test_starts_degraded_without_a_driver_then_recovers(
    fake_nvml: FakeNvmlState, tmp_path: Path
) -> None:
    fake_nvml.set(init_error=9, gpu_count=1)  # NVML_ERROR_DRIVER_NOT_LOADED
    daemon = NvmlDaemon(fake_nvml, tmp_path)
    try:
        health = health_pb2_grpc.HealthStub(daemon.channel)
        reply = health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
        assert reply.status == health_pb2.HealthCheckResponse.NOT_SERVING
        inventory = daemon.stub.GetInventory(pb.GetInventoryRequest(), timeout=5)
        assert inventory.backend_state == pb.BACKEND_STATE_DEGRADED
        assert "driver" in inventory.backend_detail.lower()

        fake_nvml.set(init_error=None)  # the driver is loaded; the daemon retries
        wait_for(
            lambda: (
                health.Check(health_pb2.HealthCheckRequest(), timeout=5).status
                == health_pb2.HealthCheckResponse.SERVING
            ),
            timeout_s=15,
            what="the daemon to retry NVML and serve",
        )
        inventory = daemon.stub.GetInventory(pb.GetInventoryRequest(), timeout=5)
        assert len(inventory.gpus) == 1
    finally:
        output = daemon.stop()
    assert "GPU backend unavailable" in output


# ---------------------------------------------------------------- a GPU lost at start

A100_UUID = "GPU-11111111-2222-4333-8444-555555555555"


def test_gpu_lost_at_start_gets_its_facts_when_it_answers(
    fake_nvml: FakeNvmlState, tmp_path: Path
) -> None:
    fake_nvml.set(gpu_count=2)
    fake_nvml.set_gpu(1, name="NVIDIA A100-SXM4-40GB", uuid=A100_UUID, memory_total=40 * 1024**3)
    fake_nvml.lose_gpu(1)
    daemon = NvmlDaemon(fake_nvml, tmp_path)
    try:
        wait_for(daemon.serving, 15, "the daemon to open NVML")
        first_gpu, lost = daemon.inventory().gpus
        assert first_gpu.uuid == "GPU-00000000-0000-4000-8000-000000000000"
        # Facts that could not be read are recognisably missing: no UUID, no name.
        assert (lost.index, lost.uuid, lost.name) == (1, "", "")
        assert not lost.HasField("memory_total_bytes")

        fake_nvml.recover_gpu(1)
        wait_for(lambda: daemon.inventory().gpus[1].uuid == A100_UUID, 15, "GPU 1's facts")
        inventory = daemon.inventory()
        assert inventory.backend_state == pb.BACKEND_STATE_OK
        assert inventory.gpus[1].name == "NVIDIA A100-SXM4-40GB"
        assert inventory.gpus[1].memory_total_bytes == 40 * 1024**3
        assert inventory.gpus[0] == first_gpu  # the other GPU's facts are unchanged
    finally:
        output = daemon.stop()
    assert "GPU 1: facts read" in output, output


# ---------------------------------------------------------------- backend auto


def test_auto_without_a_loadable_nvml_is_degraded_not_simulated(
    unloadable_nvml_dir: Path, tmp_path: Path
) -> None:
    daemon = NvmlDaemon(None, tmp_path, AUTO, lib_dir=unloadable_nvml_dir)
    try:
        wait_for(lambda: daemon.inventory().backend_detail != "starting", 15, "the first NVML try")
        assert not daemon.serving()
        inventory = daemon.inventory()
        assert inventory.backend == pb.BACKEND_NVML
        assert inventory.backend_state == pb.BACKEND_STATE_DEGRADED
        assert "libnvidia-ml.so.1 not found" in inventory.backend_detail
        assert "is the NVIDIA driver installed?" in inventory.backend_detail
        assert list(inventory.gpus) == []  # no simulated GPUs, nor any other
    finally:
        output = daemon.stop()
    assert "GPU backend unavailable" in output and "libnvidia-ml.so.1 not found" in output
    assert "simulated" not in output, output


def test_auto_retries_nvml_until_the_driver_loads(fake_nvml: FakeNvmlState, tmp_path: Path) -> None:
    fake_nvml.set(init_error=9, gpu_count=2)  # NVML_ERROR_DRIVER_NOT_LOADED
    daemon = NvmlDaemon(fake_nvml, tmp_path, AUTO)
    try:
        wait_for(lambda: daemon.inventory().backend_detail != "starting", 15, "the first NVML try")
        inventory = daemon.inventory()
        assert (inventory.backend, inventory.backend_state) == (
            pb.BACKEND_NVML, pb.BACKEND_STATE_DEGRADED,
        )  # fmt: skip
        assert "driver not loaded" in inventory.backend_detail.lower()
        assert list(inventory.gpus) == [] and not daemon.serving()

        fake_nvml.set(init_error=None)
        wait_for(daemon.serving, 15, "the daemon to retry NVML and serve")
        inventory = daemon.inventory()
        assert inventory.backend == pb.BACKEND_NVML
        assert [g.uuid for g in inventory.gpus] == [
            "GPU-00000000-0000-4000-8000-000000000000",
            "GPU-00000000-0000-4000-8000-000000000001",
        ]
    finally:
        daemon.stop()
