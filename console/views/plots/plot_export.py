"""The plots' visible range as CSV: one row per sample, a column per curve (no Qt here)."""

from __future__ import annotations

import csv
import io
import math
import time
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


def visible_csv(
    start_s: float, end_s: float, times: FloatArray, columns: Sequence[tuple[str, FloatArray]]
) -> str:
    """Samples with start <= time <= end: local time, epoch seconds, then each column.

    Every curve of one GPU shares the ring's times, so one time column serves all;
    a value not available is an empty cell.
    """
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["time", "unix_s", *(name for name, _ in columns)])
    inside = np.flatnonzero((times >= start_s) & (times <= end_s))
    for i in inside:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(times[i]))
        cells = [_cell(values[i]) for _, values in columns]
        writer.writerow([stamp, f"{times[i]:.3f}", *cells])
    return out.getvalue()


def _cell(value: float) -> str:
    return "" if math.isnan(value) else f"{value:.6g}"
