"""The window's layout and choices survive a restart, per profile; a corrupt or
missing layout file starts the window with its defaults and says so once."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDockWidget, QMainWindow

from console.app import build_window
from console.qt import ui_state
from console.views.common.theme import DARK
from console.views.window.looks import apply_to_app
from console.views.window.window_looks import WindowLooks

NODE = "127.0.0.1:1"  # nothing listens: the layout needs no data


@pytest.fixture
def windows(qtbot) -> Iterator[list[QMainWindow]]:  # type: ignore[no-untyped-def]
    opened: list[QMainWindow] = []
    yield opened
    for window in opened:
        window.session.stop()  # type: ignore[attr-defined]
    apply_to_app(DARK)


def open_window(qtbot, windows: list[QMainWindow], profile: str):  # type: ignore[no-untyped-def]
    window = build_window([NODE], profile=profile, theme="dark")
    qtbot.addWidget(window)
    windows.append(window)
    window.show()
    qtbot.waitExposed(window)
    return window


def looks_of(window: QMainWindow) -> WindowLooks:
    looks = window.findChild(WindowLooks)
    assert isinstance(looks, WindowLooks)
    return looks


def test_layout_and_choices_come_back_after_a_restart(qtbot, windows, isolated_config) -> None:  # type: ignore[no-untyped-def]
    window = open_window(qtbot, windows, "prod")
    dock = window.findChild(QDockWidget, "alertDock")
    window.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, dock)  # moved by a person
    window.grid_part.group_by.setCurrentIndex(1)
    grouping = window.grid_part.group_by.currentText()
    window.grid_part.color_by.setCurrentIndex(1)
    colour = window.grid_part.color_by.currentText()
    window.tabs.setCurrentWidget(window.alerts.event_log)
    window.resizeDocks([window.detail_dock], [700], Qt.Orientation.Horizontal)
    window.detail.plots.choose_span(3600.0)
    looks_of(window).menu.theme_actions["light"].trigger()
    window.close()
    saved = isolated_config / "ui-state" / "prod.json"
    remembered = json.loads(saved.read_text())
    assert remembered["theme"] == "light" and remembered["span_s"] == 3600.0
    assert remembered["window_state"]  # the docks' sizes: test_real_x.py

    again = open_window(qtbot, windows, "prod")
    # The geometry itself is checked in test_real_x.py: offscreen's 800x800 screen is
    # smaller than the window, and Qt fits a restored geometry into the screen.
    moved = again.findChild(QDockWidget, "alertDock")
    assert again.dockWidgetArea(moved) == Qt.DockWidgetArea.RightDockWidgetArea
    assert (
        again.grid_part.group_by.currentText() == grouping
        and again.grid_part.color_by.currentText() == colour
    )
    assert again.tabs.currentWidget() is again.alerts.event_log
    assert again.detail.plots.window.span_s == 3600.0
    assert again.detail.plot_panel.bar.presets[3600.0].isChecked()
    looks = looks_of(again)
    assert looks.looks.theme.name == "light" and looks.menu.theme_actions["light"].isChecked()

    other = open_window(qtbot, windows, "lab")  # another profile: its own (no) memory
    assert other.tabs.currentIndex() == 0 and other.grid_part.group_by.currentIndex() == 0
    assert looks_of(other).looks.choice == "dark"  # the setting's, nobody picked one


def test_the_setting_decides_the_theme_until_someone_picks_one(qtbot, windows) -> None:  # type: ignore[no-untyped-def]
    window = open_window(qtbot, windows, "ops")
    window.close()  # nothing picked: no theme remembered
    state = ui_state.load(ui_state.state_path("ops"))
    assert state.theme is None and state.geometry


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        json.dumps({"version": 1, "tab": 5}),
        json.dumps([1, 2]),
        json.dumps({"version": 99}),
        json.dumps({"version": 1, "geometry": "!!!not base64"}),
    ],
    ids=["not json", "wrong kind", "not a table", "future version", "corrupt blob"],
)
def test_a_corrupt_file_starts_with_the_defaults_and_says_so_once(
    qtbot, windows, isolated_config: Path, caplog, content: str
) -> None:  # type: ignore[no-untyped-def]
    path = isolated_config / "ui-state" / f"bad-{abs(hash(content))}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    profile = path.stem
    with caplog.at_level(logging.INFO, logger="console.qt.ui_state"):
        window = open_window(qtbot, windows, profile)
        assert window.tabs.currentIndex() == 0 and window.grid_part.group_by.currentIndex() == 0
        ui_state.load(path)  # asked again: not said again
    said = [r for r in caplog.records if r.name == "console.qt.ui_state"]
    assert len(said) == 1, [r.getMessage() for r in said]
    assert str(path) in said[0].getMessage() or "not restored" in said[0].getMessage()
    window.close()  # and the next close writes a good file over it
    assert json.loads(path.read_text())["version"] == 1


def test_a_missing_file_is_a_first_start(tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    with caplog.at_level(logging.INFO, logger="console.qt.ui_state"):
        assert ui_state.load(tmp_path / "none.json") == ui_state.UiState()
    assert caplog.records == []


def test_profile_names_make_safe_file_names() -> None:
    assert ui_state.state_path("../etc/x").name == ".._etc_x.json"
    assert ui_state.state_path("").name == "default.json"
