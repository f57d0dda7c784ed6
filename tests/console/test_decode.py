"""Protobuf → fleet updates: unset fields stay unknown (NaN / None), never 0."""

from __future__ import annotations

import math

from console.connections.decode import decode_batch, decode_inventory
from console.fleet.columns import column, value
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1.gpu_metrics import FAN_PCT, MEM_USED_BYTES, POWER_W, TEMP_GPU_C


def test_unset_fields_decode_as_unknown() -> None:
    batch = pb.SampleBatch(timestamp_unix_ms=1500, tick=1, gpus=[
        pb.GpuSample(index=0, health=pb.GPU_HEALTH_OK, temp_gpu_c=61.5, mem_used_bytes=2 * 1024**3),
        pb.GpuSample(index=1, health=pb.GPU_HEALTH_LOST, error="GPU is lost"),
    ])  # fmt: skip
    update = decode_batch("n:1", batch, gpu_count=2)
    assert update.time_s == 1.5
    assert update.rows[0, column(TEMP_GPU_C)] == 61.5
    assert update.rows[0, column(MEM_USED_BYTES)] == 2.0
    assert math.isnan(update.rows[0, column(FAN_PCT)])
    assert all(math.isnan(v) for v in update.rows[1])
    assert value(update.rows[0], POWER_W) is None and update.gpus[1].health == "lost"


def test_inventory_optional_fields() -> None:
    inventory = pb.Inventory(hostname="h", backend=pb.BACKEND_NVML, sample_interval_ms=500,
                             gpus=[pb.GpuInfo(index=0, uuid="GPU-x", name="L40S")])  # fmt: skip
    info = decode_inventory("h:1", inventory).info
    assert info.driver_version is None and info.backend == "nvml"
    assert info.sample_interval_s == 0.5 and info.gpus[0].power_limit_w is None
