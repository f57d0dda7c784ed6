"""The guided tour: at a person's first start, each step pointing at the real widget it
names (the ring round it, the callout beside it, not over it), driven by keys; skipped
or seen once, it comes back only from Help ▸ Guided tour. Real widgets on a real daemon."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QWidget

from console.main_window import MainWindow
from console.qt import ui_state
from console.views.window.guided_tour import GuidedTour
from console.views.window.tour_steps import STEPS


def shown_rect(window: MainWindow, widgets: list[QWidget]) -> QRect:
    """Where the widgets show in the window, worked out here apart from the tour's code."""
    found = QRect()
    for widget in widgets:
        if widget.isVisibleTo(window):
            seen = widget.visibleRegion().boundingRect()
            found |= seen.translated(widget.mapTo(window, QPoint(0, 0)))
    return found


def expected(window: MainWindow, step: str) -> list[QWidget]:
    """What a person reading the step would look for."""
    alerts, detail, grid = window.alerts.alert_panel, window.detail, window.grid_part
    return {
        "grid": [grid.fleet_scroll],
        "search": [grid.search],
        "alerts": [alerts.table],
        "acknowledge": [alerts.acknowledge, alerts.silence],
        "time": [detail.plot_panel.bar],
        "reserve": [window.control.people_panel],
        "kill": [detail.kill_zone, detail.process_table],
        "status": [grid.summary],
    }[step]


def press(tour: GuidedTour, key: Qt.Key) -> None:
    QTest.keyClick(tour, key)
    QApplication.processEvents()


def test_the_tour_walks_every_step_by_key_pointing_at_the_real_widgets(qtbot, open_console) -> None:  # type: ignore[no-untyped-def]
    console = open_console()
    window = console.window
    window.grid.select(console.target, 1)
    qtbot.waitUntil(lambda: window.detail.plots.point_count() > 0, timeout=15_000)
    assert not ui_state.tour_seen()
    assert window.help_menu.first_start()  # a person's first start shows it
    tour = window.help_menu.tour
    qtbot.waitUntil(lambda: tour.isVisible() and tour.hasFocus(), timeout=5000)
    assert tour.geometry() == window.rect()
    seen: list[str] = []
    for number, step in enumerate(STEPS):
        assert tour.index == number and tour.title.text() == step.title
        widgets = expected(window, step.target)
        assert any(w.isVisibleTo(window) for w in widgets), step.target  # its tab opened
        # The ring on the part as it shows once laid out (a scroll bar may appear after
        # the step scrolled the detail): the tour follows it.
        qtbot.waitUntil(lambda w=widgets: tour.hole == shown_rect(window, w), timeout=5000)
        hole = tour.hole
        assert not hole.isEmpty(), step.target
        callout = tour.callout.geometry()
        assert window.rect().contains(callout), (step.target, callout)
        if hole.height() < window.height() // 2 or hole.width() < window.width() // 2:
            assert not callout.intersects(hole), (step.target, callout, hole)  # beside it
        seen.append(step.target)
        if number == 2:  # back and forth by key
            press(tour, Qt.Key.Key_Left)
            assert tour.index == 1
            press(tour, Qt.Key.Key_Right)
            assert tour.index == 2
        if number + 1 < len(STEPS):
            press(tour, Qt.Key.Key_Right)
    assert seen == [s.target for s in STEPS]
    assert tour.next.text() == "Done"
    with qtbot.waitSignal(tour.finished) as done:
        press(tour, Qt.Key.Key_Return)
    assert done.args == [True] and not tour.isVisible()
    assert ui_state.tour_seen()
    assert not window.help_menu.first_start()  # seen: not at the next start


def test_escape_skips_the_tour_for_good_and_help_brings_it_back(qtbot, open_console) -> None:  # type: ignore[no-untyped-def]
    window = open_console().window
    window.help_menu.first_start()
    tour = window.help_menu.tour
    qtbot.waitUntil(lambda: tour.isVisible() and tour.hasFocus(), timeout=5000)
    press(tour, Qt.Key.Key_Right)
    with qtbot.waitSignal(tour.finished) as done:
        press(tour, Qt.Key.Key_Escape)
    assert done.args == [False] and not tour.isVisible()
    assert ui_state.tour_seen() and not window.help_menu.first_start()
    window.help_menu.tour_action.trigger()  # Help ▸ Guided tour: from the start again
    assert tour.isVisible() and tour.index == 0
    press(tour, Qt.Key.Key_Left)  # nothing before the first step
    assert tour.index == 0 and not tour.back.isEnabled()


def test_the_tour_follows_the_window_when_it_is_resized(qtbot, open_console) -> None:  # type: ignore[no-untyped-def]
    window = open_console().window
    window.help_menu.tour.start()
    tour = window.help_menu.tour
    before = tour.hole
    window.resize(1366, 768)
    qtbot.waitUntil(lambda: tour.geometry() == window.rect(), timeout=5000)
    qtbot.waitUntil(lambda: tour.hole == shown_rect(window, [window.grid_part.fleet_scroll]),
                    timeout=5000)  # fmt: skip
    assert tour.hole != before


def test_a_home_that_cannot_be_written_only_shows_the_tour_again(
    tmp_path, monkeypatch, caplog
) -> None:  # type: ignore[no-untyped-def]
    blocked = tmp_path / "file-not-dir"
    blocked.write_text("")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(blocked))
    ui_state.remember_tour_seen()  # no exception: a warning, and the tour again next time
    assert not ui_state.tour_seen()
    assert "guided tour" in caplog.text
