"""Colour scales for GPU tiles: temperature and utilisation."""

from __future__ import annotations

import itertools

from PySide6.QtGui import QColor

from gpufleet.v1.gpu_metrics import ColourScale

# (value, colour) stops; colours between stops are interpolated.
TEMPERATURE_STOPS = (
    (30.0, QColor("#2b6cb0")),
    (50.0, QColor("#2f855a")),
    (70.0, QColor("#b7791f")),
    (80.0, QColor("#dd6b20")),
    (88.0, QColor("#c53030")),
)
UTILISATION_STOPS = (
    (0.0, QColor("#2d3748")),
    (50.0, QColor("#2c7a7b")),
    (100.0, QColor("#38a169")),
)
# The stops of each colour scale (the first is the default); the catalogue says which
# metric drives each.
STOPS = {
    ColourScale.TEMPERATURE: TEMPERATURE_STOPS,
    ColourScale.UTILISATION: UTILISATION_STOPS,
}
UNKNOWN = QColor("#4a5568")
LOST = QColor("#1a1a1a")


def scale_color(value: float | None, stops: tuple[tuple[float, QColor], ...]) -> QColor:
    if value is None or value != value:  # None or NaN: not available
        return UNKNOWN
    if value <= stops[0][0]:
        return stops[0][1]
    for (lo, lo_color), (hi, hi_color) in itertools.pairwise(stops):
        if value <= hi:
            t = (value - lo) / (hi - lo)
            return QColor.fromRgbF(
                lo_color.redF() + (hi_color.redF() - lo_color.redF()) * t,
                lo_color.greenF() + (hi_color.greenF() - lo_color.greenF()) * t,
                lo_color.blueF() + (hi_color.blueF() - lo_color.blueF()) * t,
            )
    return stops[-1][1]
