"""The per-GPU time series the console keeps, and how each is read from a sample."""

from __future__ import annotations

import enum

import numpy as np
import numpy.typing as npt

from gpufleet.v1 import node_pb2 as pb

GIB = float(1024**3)


class Metric(enum.IntEnum):
    """Columns of a node's sample ring, in storage order."""

    UTIL_GPU = 0
    UTIL_MEM = 1
    MEM_USED_GIB = 2
    TEMP_GPU = 3
    TEMP_MEM = 4
    POWER_W = 5
    FAN_PCT = 6
    SM_CLOCK_MHZ = 7


METRIC_COUNT = len(Metric)
_FIELDS = (
    (Metric.UTIL_GPU, "util_gpu_pct", 1.0),
    (Metric.UTIL_MEM, "util_mem_pct", 1.0),
    (Metric.MEM_USED_GIB, "mem_used_bytes", 1.0 / GIB),
    (Metric.TEMP_GPU, "temp_gpu_c", 1.0),
    (Metric.TEMP_MEM, "temp_mem_c", 1.0),
    (Metric.POWER_W, "power_w", 1.0),
    (Metric.FAN_PCT, "fan_pct", 1.0),
    (Metric.SM_CLOCK_MHZ, "sm_clock_mhz", 1.0),
)


def sample_row(sample: pb.GpuSample) -> npt.NDArray[np.float32]:
    """One GPU's metrics as a row; an unset field is NaN (a gap in the plot)."""
    row = np.full(METRIC_COUNT, np.nan, dtype=np.float32)
    for metric, field, scale in _FIELDS:
        if sample.HasField(field):
            row[metric] = getattr(sample, field) * scale
    return row


def batch_rows(batch: pb.SampleBatch, gpu_count: int) -> npt.NDArray[np.float32]:
    """All GPUs of a batch as a (gpu_count, METRIC_COUNT) array; missing GPUs are NaN."""
    rows = np.full((gpu_count, METRIC_COUNT), np.nan, dtype=np.float32)
    for sample in batch.gpus:
        if sample.index < gpu_count:
            rows[sample.index] = sample_row(sample)
    return rows
