"""Every text colour against the background it is drawn on, in both themes: WCAG 2.x
contrast (relative luminance) of at least 4.5:1 (issue #33: the stale tile text was
3.6:1, the light theme's warning colour 3.4:1 on its window).

The pairs: the palette's and the plots' (Theme.color_pairs), every stylesheet rule's,
the status words the tables colour (alert severities, workload and silence states) as
the models give them with the theme applied, the GPU detail's health words, and the
tiles' own text (theme-independent: the tiles keep their fills in both themes).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor

from console.fleet.health import HealthState
from console.fleet.health_report import Part
from console.qt import status_inks
from console.qt.alert_model import AlertTableModel
from console.qt.silence_model import ENDING_SOON_COLOR, ENDING_SOON_TEXT, STATE_INKS
from console.qt.workload_model import STATE_COLUMN, WorkloadTableModel
from console.views.common import theme as themes
from console.views.common.theme import THEMES, Theme, contrast
from console.views.detail.health_section import report_html
from console.views.grid.tile_colors import STOPS, UNKNOWN, scale_color
from console.views.grid.tile_painter import (
    HEALTH_STYLES,
    RESERVED_TEXT,
    RUNNING_TEXT,
    STALE_FILL,
    STALE_TEXT,
    TEXT,
)
from gpufleet.states import SilenceState, WorkloadState
from tests.console.qss_pairs import pairs
from tests.console.test_alert_table import alert, fleet_with
from tests.console.test_control_model import A, workload
from tests.console.test_control_model import fleet_with as gpu_fleet_with

Severity = type(alert(A, "a-0").severity)  # the alert rows' severities, wherever defined
AA = 4.5  # WCAG 2 AA, body text
DISABLED = 3.0  # inactive controls: exempt from AA, still kept legible


@pytest.fixture(params=list(THEMES.values()), ids=list(THEMES))
def shown(request: pytest.FixtureRequest) -> Iterator[Theme]:
    """The theme applied as the console applies it; dark again afterwards."""
    themes.set_current(request.param)
    yield request.param
    themes.set_current(themes.DARK)


def name(colour: QColor | str | None) -> str:
    assert colour is not None, "a status word without a colour"
    return colour if isinstance(colour, str) else colour.name()


def rows_of(theme: Theme) -> tuple[tuple[str, str], ...]:
    """The backgrounds a table's rows have: its base, every other row's, the window's."""
    return (("base", theme.base), ("alternate rows", theme.alternate_base),
            ("window", theme.window))  # fmt: skip


def low(found: dict[str, tuple[str, str]], floor: float = AA) -> dict[str, float]:
    return {what: round(contrast(fg, bg), 2) for what, (fg, bg) in found.items()
            if contrast(fg, bg) < floor}  # fmt: skip


def test_the_backgrounds_are_the_stylesheets(shown: Theme) -> None:
    """The rows the words are read against are the ones the stylesheet paints."""
    sheet = shown.stylesheet()
    assert f"alternate-background-color: {shown.alternate_base}" in sheet
    assert re.search(rf"QTableView {{ background: {shown.base};", sheet)
    assert re.search(rf"QMainWindow, [^{{]*{{\s*background: {shown.window};", sheet)


def test_the_palette_plots_and_inks(shown: Theme) -> None:
    assert low(shown.color_pairs()) == {}


def test_every_stylesheet_rule(shown: Theme) -> None:
    found = pairs(shown.stylesheet(), shown.window)
    assert len(found) > 40
    bad = [(p.selector, p.foreground, p.background) for p in found
           if contrast(p.foreground, p.background) < (DISABLED if p.disabled else AA)]  # fmt: skip
    assert bad == []


def test_alert_severities_as_the_table_colours_them(qtbot, shown: Theme) -> None:  # type: ignore[no-untyped-def]
    rows = [alert(A, f"a-{s.name}", severity=s) for s in Severity]
    model = AlertTableModel(fleet_with({A: rows}))
    found = {}
    for row in range(model.rowCount()):
        ink = name(model.index(row, 0).data(Qt.ItemDataRole.ForegroundRole))
        for where, background in rows_of(shown):
            found[f"{model.index(row, 0).data()} on {where}"] = (ink, background)
    assert len(found) == 3 * len(Severity)
    assert low(found) == {}


def test_workload_states_as_the_table_colours_them(qtbot, shown: Theme) -> None:  # type: ignore[no-untyped-def]
    fleet = gpu_fleet_with(A)
    for number, state in enumerate(WorkloadState):
        fleet.control.apply(dataclasses.replace(workload(f"w-{number}"), state=state))
    model = WorkloadTableModel(fleet)
    found = {}
    for row in range(model.rowCount()):
        index = model.index(row, STATE_COLUMN)
        ink = index.data(Qt.ItemDataRole.ForegroundRole)
        for where, background in rows_of(shown):
            if ink is not None:  # finished: the text's own colour
                found[f"{index.data()} on {where}"] = (name(ink), background)
    assert len(found) >= 5 * 3
    assert low(found) == {}


def test_silence_states_and_the_ending_soon_row(shown: Theme) -> None:
    found = {f"{state.name} on {where}": (name(status_inks.colour(STATE_INKS[state])), bg)
             for state in SilenceState for where, bg in rows_of(shown)}  # fmt: skip
    found["ending soon"] = (ENDING_SOON_TEXT.name(), ENDING_SOON_COLOR.name())
    assert low(found) == {}


def test_the_health_words_of_the_gpu_detail(shown: Theme) -> None:
    found = {}
    for state in HealthState:
        html = report_html([Part("Health", (state.name.lower(), "    a note under it"))], state)
        for number, colour in enumerate(re.findall(r"color:\s*(#[0-9a-fA-F]{6})", html)):
            found[f"{state.name} {number}"] = (colour, shown.window)
    assert len(found) == 2 * len(HealthState)
    assert low(found) == {}


def test_the_tiles_own_text() -> None:
    found = {
        "stale tile": (STALE_TEXT.name(), STALE_FILL.name()),
        "text on a stale tile": (TEXT.name(), STALE_FILL.name()),
        **{f"{style} health tag": (text.name(), fill.name())
           for style, (fill, _border, text) in HEALTH_STYLES.items()},
    }  # fmt: skip
    assert low(found) == {}


def tile_fills() -> dict[str, str]:
    """Every fill a tile can have: each scale's colours from end to end (blends too)."""
    fills = {"unknown": UNKNOWN.name()}
    for scale, stops in STOPS.items():
        low_end, high_end = stops[0][0], stops[-1][0]
        for step in range(101):
            value = low_end + (high_end - low_end) * step / 100
            fills[f"{scale.name} {value:g}"] = scale_color(value, stops).name()
    return fills


@pytest.mark.parametrize(
    "ink", [TEXT, RESERVED_TEXT, RUNNING_TEXT], ids=["text", "holder", "running workload"]
)
def test_the_tiles_text_on_every_fill(ink) -> None:  # type: ignore[no-untyped-def]
    """The middle line of a reserved or busy tile too (was 3.0:1 lilac, 3.4:1 green)."""
    found = {where: (ink.name(), fill) for where, fill in tile_fills().items()}
    assert low(found) == {}
