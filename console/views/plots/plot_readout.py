"""The crosshair's words: each curve's value at a time, and the time (no Qt here).

A curve's value at time t is its nearest sample's, if that sample is within
1.5 sampling intervals of t; further away (a gap, before the first sample) it
is "n/a", never a value borrowed from minutes away.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
DAY_S = 86400.0


@dataclass(frozen=True)
class CurveReading:
    label: str
    unit: str
    colour: str
    value: float | None


def value_at(times: FloatArray, values: FloatArray, t: float) -> float | None:
    """The value of the sample nearest to `t`, None where there is none close enough."""
    if times.size == 0:
        return None
    i = int(np.searchsorted(times, t))
    nearest = min((j for j in (i - 1, i) if 0 <= j < times.size), key=lambda j: abs(times[j] - t))
    step = (times[-1] - times[0]) / (times.size - 1) if times.size > 1 else 1.0
    if abs(times[nearest] - t) > 1.5 * max(step, 1e-3):
        return None
    found = float(values[nearest])
    return None if math.isnan(found) else found


def format_value(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    digits = 0 if abs(value) >= 100 else 1 if abs(value) >= 10 else 2
    return f"{value:.{digits}f} {unit}"


def format_time(t: float, span_s: float) -> str:
    """Local time; with the date once the range is longer than a day."""
    pattern = "%a %d %b %H:%M:%S" if span_s > DAY_S else "%H:%M:%S"
    return time.strftime(pattern, time.localtime(t))


def readout_html(t: float, span_s: float, readings: list[CurveReading]) -> str:
    """The label beside the crosshair: the time, then one line per curve in its colour."""
    lines = [f"<b>{format_time(t, span_s)}</b>"]
    for r in readings:
        lines.append(
            f'<span style="color:{r.colour}">■</span> {r.label} {format_value(r.value, r.unit)}'
        )
    return "<br>".join(lines)
