"""Conversion from backend readings to the gpufleet.v1 messages.

`None` in a reading leaves the matching proto3 `optional` field unset.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpufleet.v1 import node_pb2 as pb
from node_daemon.backends.readings import (
    GpuHealth,
    GpuReading,
    GpuStatic,
    MigReading,
    ProcessReading,
)
from node_daemon.health.model import GpuCondition
from node_daemon.health.wire import condition_message

_HEALTH = {
    GpuHealth.OK: pb.GPU_HEALTH_OK,
    GpuHealth.LOST: pb.GPU_HEALTH_LOST,
    GpuHealth.ERROR: pb.GPU_HEALTH_ERROR,
}
_OPTIONAL_PROCESS_FIELDS = (
    "start_time_unix_ms", "user", "command", "gpu_memory_bytes", "container_id", "slurm_job_id",
    "sm_util_pct", "cpu_pct", "host_memory_bytes",
)  # fmt: skip
_OPTIONAL_STATIC_FIELDS = (
    "serial", "pci_bus_id", "memory_total_bytes", "power_limit_w", "temp_slowdown_c",
    "temp_shutdown_c", "vbios_version", "power_limit_default_w", "power_limit_min_w",
    "power_limit_max_w",
)  # fmt: skip

# Appended to a stored batch, these bytes set `replayed = true`: protobuf merges
# concatenated messages, so a replayed batch needs no re-serialization.
REPLAYED_SUFFIX = pb.SampleBatch(replayed=True).SerializeToString()


def _optional_kwargs(source: object, names: Sequence[str]) -> dict[str, Any]:
    values = ((name, getattr(source, name)) for name in names)
    return {name: value for name, value in values if value is not None}


def _metric_kwargs(reading: GpuReading) -> dict[str, Any]:
    """The reading's values as GpuSample keywords. Typed Any: the stub types each
    keyword, and which field a name is only the catalogue (checked by the tests) knows."""
    return reading.by_field()


def process_message(process: ProcessReading) -> pb.GpuProcess:
    return pb.GpuProcess(pid=process.pid, **_optional_kwargs(process, _OPTIONAL_PROCESS_FIELDS))


def mig_message(instance: MigReading) -> pb.MigInstance:
    message = pb.MigInstance(
        gpu_instance_id=instance.gpu_instance_id, compute_instance_id=instance.compute_instance_id,
        profile=instance.profile, uuid=instance.uuid,
        processes=[process_message(p) for p in instance.processes],
    )  # fmt: skip
    if instance.mem_used_bytes is not None:
        message.mem_used_bytes = instance.mem_used_bytes
    if instance.mem_total_bytes is not None:
        message.mem_total_bytes = instance.mem_total_bytes
    return message


def sample_message(
    reading: GpuReading,
    processes: Sequence[ProcessReading],
    condition: GpuCondition | None = None,
) -> pb.GpuSample:
    sample = pb.GpuSample(
        index=reading.index,
        health=_HEALTH[reading.health],
        error=reading.error,
        xids=reading.xids,
        processes=[process_message(p) for p in processes],
        nvlink_down_links=reading.nvlink_down_links,
        mig_instances=[mig_message(m) for m in reading.mig],
        # The catalogue's metrics, each the GpuSample field of its name.
        **_metric_kwargs(reading),
    )
    if condition is not None:
        sample.condition.CopyFrom(condition_message(condition))
        sample.xid_counts.update(condition.xid_counts)
    return sample


def batch_message(
    timestamp_unix_ms: int,
    tick: int,
    readings: Sequence[GpuReading],
    processes: Mapping[int, Sequence[ProcessReading]],
    conditions: Mapping[int, GpuCondition] | None = None,
) -> pb.SampleBatch:
    judged = conditions or {}
    samples = [sample_message(r, processes.get(r.index, ()), judged.get(r.index)) for r in readings]
    return pb.SampleBatch(timestamp_unix_ms=timestamp_unix_ms, tick=tick, gpus=samples)


def gpu_info_message(gpu: GpuStatic) -> pb.GpuInfo:
    return pb.GpuInfo(
        index=gpu.index,
        uuid=gpu.uuid,
        name=gpu.name,
        mig_enabled=gpu.mig_enabled,
        **_optional_kwargs(gpu, _OPTIONAL_STATIC_FIELDS),
    )
