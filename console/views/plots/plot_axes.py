"""Axes that stay legible at any plot height: few y ticks, a fixed width, local time.

pyqtgraph always labels its first tick level, however short the axis: on a
plot squeezed to 10 px the labels were drawn over each other. `SparseAxis`
spaces its labels at least `LABEL_PITCH_PX` apart, with no minor levels, so
the labels it draws cannot overlap however short the axis.
"""

from __future__ import annotations

import math
from typing import Any

import pyqtgraph as pg

# Least pixels from one y label to the next: a label is about 11 px high; the rest is air.
LABEL_PITCH_PX = 20.0
Y_AXIS_WIDTH = 48  # fixed, so the four plots' left edges line up whatever the values
_NICE = (1.0, 2.0, 2.5, 5.0, 10.0)


def nice_step(raw: float) -> float:
    """The smallest of 1, 2, 2.5, 5 x 10^k that is at least `raw`."""
    power = 10.0 ** math.floor(math.log10(raw))
    return next(n * power for n in _NICE if n * power >= raw * (1 - 1e-9))


class SparseAxis(pg.AxisItem):
    """A left axis with one tick level, its labels at least LABEL_PITCH_PX apart."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("left", **kwargs)
        self.setStyle(maxTickLevel=0, maxTextLevel=0)
        self.setWidth(Y_AXIS_WIDTH)
        # No SI prefix: the unit is in the plot's title; working it out re-set the
        # (hidden) label's HTML at every range change.
        self.enableAutoSIPrefix(False)

    def tickSpacing(self, minVal: float, maxVal: float, size: float) -> list[tuple[float, float]]:
        span = abs(maxVal - minVal)
        if span == 0 or not math.isfinite(span) or size <= 0:
            return []
        return [(nice_step(span * LABEL_PITCH_PX / size), 0.0)]


def time_axis() -> pg.DateAxisItem:
    """Local time, its labels thinned by pyqtgraph to the axis's width."""
    axis = pg.DateAxisItem(orientation="bottom")
    axis.enableAutoSIPrefix(False)  # seconds since 1970 never take a prefix
    return axis
