"""Protobuf → fleet updates: unset fields stay unknown (NaN / None), never 0."""

from __future__ import annotations

import math

from console.connections.decode import decode_batch, decode_inventory
from console.fleet.columns import column, value
from console.fleet.updates import GpuSnapshot
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


def test_an_idle_gpus_snapshot_is_one_record_tick_after_tick() -> None:
    """Idle GPUs say the same each tick: their snapshot is shared, not made anew for the
    collector to walk (10,000 a second at 10,000 GPUs). A GPU with a process, or one
    whose health changed, gets its own."""
    idle = pb.GpuSample(index=0, health=pb.GPU_HEALTH_OK)
    busy = pb.GpuSample(index=1, health=pb.GPU_HEALTH_OK, processes=[pb.GpuProcess(pid=7)])

    def tick(ms: int, *gpus: pb.GpuSample) -> tuple[GpuSnapshot, ...]:
        batch = pb.SampleBatch(timestamp_unix_ms=ms, tick=ms, gpus=gpus)
        return decode_batch("n:1", batch, 2).gpus

    first, second = tick(1000, idle, busy), tick(2000, idle, busy)
    assert first[0] is second[0] and first[0].processes == ()
    assert first[1] is not second[1] and second[1].processes[0].pid == 7
    lost = tick(3000, pb.GpuSample(index=0, health=pb.GPU_HEALTH_LOST, error="gone"))
    assert lost[0] is not first[0] and (lost[0].health, lost[0].error) == ("lost", "gone")
