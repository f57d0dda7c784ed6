"""GpuProcess's nvitop columns decode into the process record; unset stays None, never 0."""

from __future__ import annotations

from console.connections.decode import decode_batch
from console.fleet.process_row import ProcessRow
from gpufleet.v1 import node_pb2 as pb


def _processes(*processes: pb.GpuProcess) -> tuple[ProcessRow, ...]:
    batch = pb.SampleBatch(timestamp_unix_ms=1000, tick=1, gpus=[
        pb.GpuSample(index=0, health=pb.GPU_HEALTH_OK, processes=list(processes)),
    ])  # fmt: skip
    return decode_batch("n:1", batch, gpu_count=1).gpus[0].processes


def test_process_columns_decode() -> None:
    (row,) = _processes(pb.GpuProcess(pid=7, sm_util_pct=42.0, cpu_pct=187.5,
                                      host_memory_bytes=3 << 30))  # fmt: skip
    assert (row.sm_util_pct, row.cpu_pct, row.host_memory_bytes) == (42.0, 187.5, 3 << 30)


def test_unreported_process_columns_are_none_and_zero_is_zero() -> None:
    unset, zero = _processes(
        pb.GpuProcess(pid=7), pb.GpuProcess(pid=8, sm_util_pct=0, cpu_pct=0, host_memory_bytes=0)
    )
    assert (unset.sm_util_pct, unset.cpu_pct, unset.host_memory_bytes) == (None, None, None)
    assert (zero.sm_util_pct, zero.cpu_pct, zero.host_memory_bytes) == (0.0, 0.0, 0)
