"""The incident report's drawings as inline SVG: the timeline and each GPU's line charts.

Written here, by hand: no plotting library, no script, no external reference, so the
report is one file that opens anywhere. Every text is escaped (`esc`): names, summaries
and users come from the nodes, and a hostile node must not add markup.
"""

from __future__ import annotations

import datetime as dt
import html
import math
from collections.abc import Sequence

from console.fleet.incident import LANES, GpuPlot, Mark, Series, Window

CHART_W, CHART_H = 300, 140
PAD_L, PAD_R, PAD_T, PAD_B = 44, 8, 22, 20
LINE_W, LANE_H, LABEL_W = 960, 26, 110
COLOURS = {"temp_gpu_c": "#dd6b20", "power_w": "#2f855a", "util_gpu_pct": "#2b6cb0"}
TONES = {"critical": "#c53030", "warning": "#d69e2e", "info": "#3182ce", "clear": "#38a169"}
FIXED_AXES = {"util_gpu_pct": (0.0, 100.0)}


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def clock(at_ms: int, span_ms: int) -> str:
    """A tick's label: the time of day, with the date where the span passes a day."""
    moment = dt.datetime.fromtimestamp(at_ms / 1000).astimezone()
    return moment.strftime("%m-%d %H:%M" if span_ms > 86_400_000 else "%H:%M:%S")


def _x(at_ms: int, start_ms: int, end_ms: int, left: float, width: float) -> float:
    return left + width * (at_ms - start_ms) / max(1, end_ms - start_ms)


# -- the timeline ---------------------------------------------------------------------


def timeline(
    window: Window, marks: Sequence[Mark], spans: Sequence[tuple[int, int | None, str]] = ()
) -> str:
    """One lane per kind of mark across the window; each mark's words on hover (<title>).

    `spans` (start, end or None while it lasts, tone) are drawn as bars in the alerts lane:
    how long each alert fired within the window.
    """
    height = PAD_T + LANE_H * len(LANES) + PAD_B
    width = LINE_W - LABEL_W - PAD_R
    parts = [f'<svg class="timeline" xmlns="http://www.w3.org/2000/svg" width="{LINE_W}" '
             f'height="{height}" viewBox="0 0 {LINE_W} {height}" role="img">']  # fmt: skip
    for row, lane in enumerate(LANES):
        y = PAD_T + row * LANE_H
        parts.append(f'<text x="4" y="{y + 17}" class="lane">{esc(lane)}</text>'
                     f'<line x1="{LABEL_W}" x2="{LINE_W - PAD_R}" y1="{y + LANE_H / 2}" '
                     f'y2="{y + LANE_H / 2}" stroke="#ccc"/>')  # fmt: skip
    parts += _spans(window, spans, width)
    for mark in marks:
        x = _x(mark.time_ms, window.start_ms, window.end_ms, LABEL_W, width)
        mid = PAD_T + LANES.index(mark.lane) * LANE_H + LANE_H / 2
        colour = TONES.get(mark.tone, "#4a5568")
        parts.append(f'<circle class="mark" data-lane="{esc(mark.lane)}" cx="{x:.1f}" '
                     f'cy="{mid:.1f}" r="5" fill="{colour}"><title>{esc(clock(mark.time_ms, 0))} '
                     f"{esc(mark.label)}</title></circle>")  # fmt: skip
    parts += _ticks(window.start_ms, window.end_ms, LABEL_W, width, height - 4)
    parts.append("</svg>")
    return "".join(parts)


def _spans(window: Window, spans: Sequence[tuple[int, int | None, str]], width: float) -> list[str]:
    mid = PAD_T + LANES.index("alerts") * LANE_H + LANE_H / 2
    bars = []
    for start, end, tone in spans:
        x1 = _x(max(start, window.start_ms), window.start_ms, window.end_ms, LABEL_W, width)
        last = window.end_ms if end is None else min(end, window.end_ms)
        x2 = _x(last, window.start_ms, window.end_ms, LABEL_W, width)
        colour = TONES.get(tone, "#4a5568")
        bars.append(f'<rect class="span" x="{x1:.1f}" y="{mid - 3:.1f}" '
                    f'width="{max(1.0, x2 - x1):.1f}" height="6" fill="{colour}" '
                    'opacity="0.35"/>')  # fmt: skip
    return bars


def _ticks(start_ms: int, end_ms: int, left: float, width: float, y: float) -> list[str]:
    labels = []
    for i in range(5):
        at = start_ms + (end_ms - start_ms) * i // 4
        anchor = ("start", "middle", "middle", "middle", "end")[i]
        labels.append(f'<text x="{_x(at, start_ms, end_ms, left, width):.1f}" y="{y}" '
                      f'text-anchor="{anchor}" class="tick">{esc(clock(at, end_ms - start_ms))}'
                      "</text>")  # fmt: skip
    return labels


# -- a GPU's charts -------------------------------------------------------------------


def chart(plot: GpuPlot, series: Series, window: Window) -> str:
    """One metric of one GPU as a line, the margin outside the window shaded, gaps left open."""
    low, high = _range(series)
    inner_w, inner_h = CHART_W - PAD_L - PAD_R, CHART_H - PAD_T - PAD_B
    peak = series.peak
    title = f"{series.label}: " + ("no data" if peak is None else f"max {peak:.1f} {series.unit}")
    parts = [
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{CHART_W}" '
        f'height="{CHART_H}" viewBox="0 0 {CHART_W} {CHART_H}" role="img" '
        f'data-metric="{esc(series.metric)}" data-points="{series.points}" '
        f'data-max="{"" if peak is None else f"{peak:.3f}"}">',
        f'<text x="{PAD_L}" y="14" class="title">{esc(title)}</text>',
        *_margins(plot, window, inner_w, inner_h),
        f'<rect x="{PAD_L}" y="{PAD_T}" width="{inner_w}" height="{inner_h}" fill="none" '
        'stroke="#999"/>',
        f'<text x="{PAD_L - 4}" y="{PAD_T + 8}" text-anchor="end" class="tick">{high:g}</text>',
        f'<text x="{PAD_L - 4}" y="{PAD_T + inner_h}" text-anchor="end" '
        f'class="tick">{low:g}</text>',
        *_ticks_two(plot, inner_w),
    ]  # fmt: skip
    colour = COLOURS.get(series.metric, "#2d3748")
    for run in _runs(plot, series, low, high, inner_w, inner_h):
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" '
                     f'points="{run}"/>')  # fmt: skip
    parts.append("</svg>")
    return "".join(parts)


def _range(series: Series) -> tuple[float, float]:
    if series.metric in FIXED_AXES:
        return FIXED_AXES[series.metric]
    known = [v for v in (*series.values, *series.peaks) if not math.isnan(v)]
    if not known:
        return 0.0, 1.0
    low, high = float(math.floor(min(known))), float(math.ceil(max(known)))
    return (low, high) if high > low else (low - 1, high + 1)


def _margins(plot: GpuPlot, window: Window, inner_w: int, inner_h: int) -> list[str]:
    """The plotted range outside the window, greyed."""
    shaded = []
    for a, b in ((plot.start_ms, window.start_ms), (window.end_ms, plot.end_ms)):
        if b > a:
            x1 = _x(max(a, plot.start_ms), plot.start_ms, plot.end_ms, PAD_L, inner_w)
            x2 = _x(min(b, plot.end_ms), plot.start_ms, plot.end_ms, PAD_L, inner_w)
            shaded.append(f'<rect x="{x1:.1f}" y="{PAD_T}" width="{max(0.0, x2 - x1):.1f}" '
                          f'height="{inner_h}" fill="#edf2f7"/>')  # fmt: skip
    return shaded


def _ticks_two(plot: GpuPlot, inner_w: int) -> list[str]:
    span = plot.end_ms - plot.start_ms
    y = CHART_H - 6
    return [f'<text x="{PAD_L}" y="{y}" class="tick">{esc(clock(plot.start_ms, span))}</text>',
            f'<text x="{PAD_L + inner_w}" y="{y}" text-anchor="end" class="tick">'
            f"{esc(clock(plot.end_ms, span))}</text>"]  # fmt: skip


def _runs(
    plot: GpuPlot, series: Series, low: float, high: float, inner_w: int, inner_h: int
) -> list[str]:
    """The line's unbroken runs as polyline points; a NaN (no reading) breaks it."""
    runs: list[list[str]] = [[]]
    for at_ms, value in zip(series.times_ms, series.values, strict=True):
        if math.isnan(value):
            runs.append([])
            continue
        x = _x(at_ms, plot.start_ms, plot.end_ms, PAD_L, inner_w)
        clipped = min(max(value, low), high)
        y = PAD_T + inner_h * (1 - (clipped - low) / (high - low))
        runs[-1].append(f"{x:.1f},{y:.1f}")
    return [" ".join(run) for run in runs if run]
