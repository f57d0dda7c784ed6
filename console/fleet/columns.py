"""The sample ring's columns: the metrics the catalogue says the console shows.

One column per entry of `gpufleet.v1.gpu_metrics.shown_metrics()`, in its
order, holding the value in the shown unit (the wire value times `Shown.scale`:
GiB for memory), NaN where the GPU did not report it. Nothing here names a
metric: whoever reads one names the catalogue's constant, e.g. `TEMP_GPU_C`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from console.fleet.updates import GpuInfo
from gpufleet.v1.gpu_metrics import ColourScale, GpuMetric, Limit, Shown, shown_metrics

Row = npt.NDArray[np.float32]  # one GPU's values, a column per shown metric

COLUMNS: Final = shown_metrics()
COLUMN_COUNT: Final = len(COLUMNS)
_INDEX: Final = {metric.field: i for i, metric in enumerate(COLUMNS)}


def shown(metric: GpuMetric[Any]) -> Shown:
    """How the console shows the metric; only shown metrics have a column."""
    if metric.shown is None:
        raise ValueError(f"{metric.field} is not shown by the console")
    return metric.shown


# What the decoder reads from each sample, column by column: (field, scale to the shown unit).
FIELD_SCALES: Final = tuple((metric.field, shown(metric).scale) for metric in COLUMNS)
# The GPU detail's plots, top to bottom.
PLOTTED: Final = tuple(metric for metric in COLUMNS if shown(metric).plot_colour)


def column(metric: GpuMetric[Any]) -> int:
    """The metric's column in a ring row."""
    return _INDEX[metric.field]


def value(row: Row | None, metric: GpuMetric[Any]) -> float | None:
    """A metric of one GPU's ring row, in its shown unit; None when not available."""
    if row is None:
        return None
    found = float(row[_INDEX[metric.field]])
    return None if math.isnan(found) else found


_COLOURING: Final = {
    scale: metric for metric in COLUMNS if (scale := shown(metric).colour_scale) is not None
}


def coloured_by(scale: ColourScale) -> GpuMetric[Any]:
    """The metric that drives a tile colour scale."""
    return _COLOURING[scale]


_CAPACITY: Final[dict[Limit, Callable[[GpuInfo], float | None]]] = {
    Limit.MEMORY_TOTAL: lambda gpu: gpu.memory_total_bytes,
    Limit.POWER_LIMIT: lambda gpu: gpu.power_limit_w,
}


def capacity(gpu: GpuInfo, metric: GpuMetric[Any]) -> float | None:
    """Where the metric's axis ends for this GPU (its inventory), in the shown unit.

    None when the metric has no such axis or the GPU does not say.
    """
    limit = shown(metric).axis_limit
    found = _CAPACITY[limit](gpu) if limit is not None else None
    return None if found is None else found * shown(metric).scale
