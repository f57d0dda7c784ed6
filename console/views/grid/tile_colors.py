"""Colour scales for GPU tiles: temperature and utilisation."""

from __future__ import annotations

import itertools

from PySide6.QtGui import QColor

from gpufleet.v1.gpu_metrics import ColourScale

# (value, colour) stops; colours between stops are interpolated. Tiles keep these
# fills in both themes, under light text: each fill, and every blend between two,
# is dark enough for 4.5:1 (WCAG AA; tests/console/test_themes.py), so the green,
# amber and orange are a shade deeper than their first versions (3.1-4.3:1).
TEMPERATURE_STOPS = (
    (30.0, QColor("#2b6cb0")),
    (50.0, QColor("#276749")),
    (70.0, QColor("#975a16")),
    (80.0, QColor("#b34d1b")),
    (88.0, QColor("#c53030")),
)
UTILISATION_STOPS = (
    (0.0, QColor("#2d3748")),
    (50.0, QColor("#2c7a7b")),
    (100.0, QColor("#276749")),
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
