"""The GPU plots in time: range bar, live and paused, zoom, crosshair, thresholds, geometry.

Real widgets (pytest-qt, offscreen) over a real SampleRing; the window-size
tests use the real MainWindow fed through the console's own decoder, as the
network thread feeds it. Real input events: mouse clicks on the range bar, a
QWheelEvent and mouse moves on the plots' viewport.
"""

from __future__ import annotations

import itertools
import math
import re
import time
from collections.abc import Iterator

import numpy as np
import pytest
from PySide6.QtCore import QEvent, QPoint, QPointF, Qt
from PySide6.QtGui import QImage, QPainter, QWheelEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from console.connections.decode import decode_batch
from console.fleet.columns import COLUMN_COUNT, column
from console.fleet.ring import SampleRing
from console.fleet.time_range import TimeWindow, coverage_note, ring_reach_s
from console.fleet.updates import GpuInfo, InventoryUpdate, LinkState, LinkUpdate, NodeInfo
from console.main_window import MainWindow
from console.session import ConsoleSession
from console.views.plots.gpu_plots import MIN_PLOT_HEIGHT, GpuPlots
from console.views.plots.plot_axes import nice_step
from console.views.plots.plot_panel import PlotPanel
from console.views.plots.plot_readout import value_at
from console.views.plots.time_range_bar import MOVED_IN_CUSTOM, PAUSED_BY_ZOOM
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1.gpu_metrics import MEM_USED_BYTES, POWER_W, TEMP_GPU_C, UTIL_GPU_PCT

END_S = 1_790_000_000.0  # the newest sample: a fixed epoch second, so every range is known
SAMPLES = 1024  # the console's ring (DEFAULT_RING_CAPACITY) at 1 s: 17 minutes


def temperature(i: int) -> float:
    return 60.0 + (i % 20)


def filled_ring(samples: int = SAMPLES, end_s: float = END_S) -> SampleRing:
    ring = SampleRing(SAMPLES, 1, COLUMN_COUNT)
    for i in range(samples):
        row = np.full((1, COLUMN_COUNT), np.nan, dtype=np.float32)
        row[0, column(UTIL_GPU_PCT)] = 50.0
        row[0, column(MEM_USED_BYTES)] = 40.0
        row[0, column(TEMP_GPU_C)] = temperature(i)
        row[0, column(POWER_W)] = 300.0 + i % 7
        ring.append(end_s - (samples - 1 - i), row, 1.0)
    return ring


@pytest.fixture
def panel(qtbot) -> PlotPanel:
    panel = PlotPanel()
    qtbot.addWidget(panel)
    panel.resize(700, 600)
    panel.show()
    qtbot.waitExposed(panel)
    return panel


def x_range(plots: GpuPlots) -> tuple[float, float]:
    start, end = plots.plot_item(TEMP_GPU_C).getViewBox().viewRange()[0]
    return float(start), float(end)


def tick_texts(axis) -> list[tuple[object, str]]:  # (QRectF, text) as the axis draws them
    image = QImage(
        max(1, int(axis.width())), max(1, int(axis.height())), QImage.Format.Format_ARGB32
    )
    painter = QPainter(image)
    try:
        _, _, texts = axis.generateDrawSpecs(painter)
    finally:
        painter.end()
    return [(rect, text) for rect, _flags, text in texts]


# The model, without Qt ------------------------------------------------------------------


def test_time_window_live_paused_custom_and_reset() -> None:
    window = TimeWindow(span_s=300)
    assert window.visible(1000.0) == (700.0, 1000.0)
    window.pause(1000.0)
    assert window.visible(2000.0) == (700.0, 1000.0)  # frozen while time moves on
    window.go_live()
    assert window.visible(2000.0) == (1700.0, 2000.0)
    window.choose_custom(100.0, 400.0)
    window.hold(150.0, 200.0)  # a zoom inside the custom range
    window.reset_zoom()
    assert not window.live and window.visible(5000.0) == (100.0, 400.0)
    window.choose_span(3600)
    assert window.live and window.custom is None and window.visible(5000.0) == (1400.0, 5000.0)
    with pytest.raises(ValueError, match="must end after it starts"):
        window.choose_custom(400.0, 100.0)


def test_a_past_moment_holds_the_span_around_it_and_live_puts_the_range_back() -> None:
    window = TimeWindow(span_s=1000)
    window.show_moment(50_000.0)  # live before: the span, 80 % of it before the moment
    assert not window.live and window.visible(99_999.0) == (49_200.0, 50_200.0)
    window.show_moment(60_000.0)  # a jump (more than a page on): centred as the first
    assert window.visible(99_999.0) == (59_200.0, 60_200.0) and window.moment_s == 60_000.0
    window.move_by_hand(59_900.0, 60_000.0)  # a zoom: the next moment keeps its span
    window.show_moment(70_000.0)
    assert window.visible(99_999.0) == (69_920.0, 70_020.0)
    window.choose_span(300)  # a preset while in the past: around the moment, not live
    assert not window.live and window.visible(99_999.0) == (69_760.0, 70_060.0)
    window.leave_moment()  # live again: as before the first moment (with the new preset)
    assert window.live and window.moment_s is None and window.visible(1000.0) == (700.0, 1000.0)
    window.choose_custom(100.0, 400.0)  # a Custom… range comes back after the past too
    window.show_moment(5_000.0)
    window.leave_moment()
    assert not window.live and window.visible(9_999.0) == (100.0, 400.0)


def test_a_moment_moving_on_moves_the_line_and_turns_a_page_past_the_range() -> None:
    window = TimeWindow(span_s=1000)
    window.show_moment(50_000.0)
    assert window.visible(0.0) == (49_200.0, 50_200.0)
    for at in (50_010.0, 50_100.0, 49_300.0, 50_140.0):  # steps and Play within the page
        window.show_moment(at)
        assert window.visible(0.0) == (49_200.0, 50_200.0) and window.moment_s == at
    window.show_moment(50_160.0)  # past 95 %: the next page, the moment at 20 % of it
    assert window.visible(0.0) == (49_960.0, 50_960.0) and window.moment_s == 50_160.0
    window.show_moment(49_900.0)  # backwards out of the page: centred as a jump
    assert window.visible(0.0) == (49_100.0, 50_100.0)
    window.choose_span(300)  # a preset: around the moment, whatever the page
    assert window.visible(0.0) == (49_660.0, 49_960.0)


def test_coverage_note_names_what_the_console_holds() -> None:
    reach = ring_reach_s(1024, 0.0, 1023.0, 1024)
    assert reach == pytest.approx(1024.0)
    assert coverage_note(END_S - 900, END_S, reach) is None
    assert coverage_note(END_S - 3600, END_S, reach) == (
        "console holds the last 17 min; longer ranges need the daemon's history"
    )
    assert coverage_note(0.0, END_S, ring_reach_s(1024, 5.0, 5.0, 1)) is None  # nothing seen yet


def test_values_at_a_time_are_the_nearest_sample_or_not_available() -> None:
    times = np.array([10.0, 11.0, 12.0, 20.0, 21.0])
    values = np.array([1.0, 2.0, np.nan, 4.0, 5.0])
    assert value_at(times, values, 11.3) == 2.0
    assert value_at(times, values, 12.1) is None  # NaN: not available
    assert value_at(times, values, 16.0) is None  # a gap: nothing near
    assert value_at(times, values, 3.0) is None  # before the first sample
    assert [nice_step(r) for r in (0.7, 11.7, 26.7, 30.0, 1500.0)] == [
        1.0,
        20.0,
        50.0,
        50.0,
        2000.0,
    ]


# The range bar ----------------------------------------------------------------------------


def test_range_buttons_change_the_visible_time_and_say_what_the_ring_holds(qtbot, panel) -> None:
    plots = panel.plots
    plots.show_series(filled_ring(), 0)
    assert x_range(plots) == pytest.approx((END_S - 900, END_S))  # default: last 15 min
    assert not plots.note.isVisible()
    qtbot.mouseClick(panel.bar.presets[300.0], Qt.MouseButton.LeftButton)
    assert x_range(plots) == pytest.approx((END_S - 300, END_S))
    qtbot.mouseClick(panel.bar.presets[3600.0], Qt.MouseButton.LeftButton)
    assert x_range(plots) == pytest.approx((END_S - 3600, END_S))
    assert plots.note.isVisible()
    assert plots.note.textItem.toPlainText() == (
        "console holds the last 17 min; longer ranges need the daemon's history"
    )
    qtbot.mouseClick(panel.bar.presets[7 * 86400.0], Qt.MouseButton.LeftButton)
    assert x_range(plots) == pytest.approx((END_S - 7 * 86400, END_S))


def test_the_source_note_sits_above_the_plots_never_over_a_curve(qtbot, panel) -> None:
    plots = panel.plots
    plots.show_series(filled_ring(), 0)
    plots.grab()
    first = plots.plot_item(UTIL_GPU_PCT)
    top_without = first.geometry().top()
    qtbot.mouseClick(panel.bar.presets[3600.0], Qt.MouseButton.LeftButton)
    assert plots.note.isVisible()
    plots.grab()  # laid out and painted as shown
    note = plots.note.sceneBoundingRect()
    areas = [plots.plot_item(m).getViewBox().sceneBoundingRect() for m in plots.curves]
    assert not any(note.intersects(area) for area in areas), (note, areas)
    assert note.bottom() <= first.getViewBox().sceneBoundingRect().top()  # above, not beside
    assert plots.sceneRect().contains(note)  # all of it in sight
    heights = [plots.plot_item(m).geometry().height() for m in plots.curves]
    assert all(h >= MIN_PLOT_HEIGHT for h in heights), heights  # room made, nothing squeezed
    qtbot.mouseClick(panel.bar.presets[900.0], Qt.MouseButton.LeftButton)
    plots.grab()
    assert not plots.note.isVisible()
    assert first.geometry().top() == top_without  # no note: its row takes no room


def test_custom_range_from_the_dialog(qtbot, panel) -> None:
    plots = panel.plots
    plots.show_series(filled_ring(), 0)
    dialog = panel.custom_dialog()
    qtbot.addWidget(dialog)
    dialog.start.setDateTime(dialog.start.dateTime().fromSecsSinceEpoch(int(END_S - 600)))
    dialog.end.setDateTime(dialog.end.dateTime().fromSecsSinceEpoch(int(END_S - 60)))
    plots.choose_custom(*dialog.chosen())
    assert x_range(plots) == pytest.approx((END_S - 600, END_S - 60))
    assert panel.bar.custom.isChecked() and panel.bar.live.text() == "❚❚ Paused"
    dialog.end.setDateTime(dialog.start.dateTime())
    ok = dialog.buttons.button(dialog.buttons.StandardButton.Ok)
    assert not ok.isEnabled() and "after" in dialog.problem.text()


def test_pause_freezes_the_view_while_samples_arrive_and_live_jumps_to_now(qtbot, panel) -> None:
    plots = panel.plots
    ring = filled_ring()
    plots.show_series(ring, 0)
    qtbot.mouseClick(panel.bar.live, Qt.MouseButton.LeftButton)
    assert not plots.window.live and panel.bar.live.text() == "❚❚ Paused"
    held_x, _ = plots.curves[TEMP_GPU_C].getOriginalDataset()
    row = np.full((1, COLUMN_COUNT), 99.0, dtype=np.float32)
    for k in range(1, 31):
        ring.append(END_S + k, row, 1.0)
        plots.show_series(ring, 0)  # the frames go on
    assert x_range(plots) == pytest.approx((END_S - 900, END_S))
    x, y = plots.curves[TEMP_GPU_C].getOriginalDataset()
    np.testing.assert_array_equal(x, held_x)
    qtbot.mouseClick(panel.bar.live, Qt.MouseButton.LeftButton)
    assert plots.window.live and panel.bar.live.text() == "● Live"
    assert x_range(plots) == pytest.approx((END_S + 30 - 900, END_S + 30))
    x, y = plots.curves[TEMP_GPU_C].getOriginalDataset()
    assert x[-1] == END_S + 30 and y[-1] == 99.0


# Zoom, pan, menu ----------------------------------------------------------------------


def wheel(
    widget, at: QPoint, notches: int, keys: Qt.KeyboardModifier = Qt.KeyboardModifier.NoModifier
) -> None:
    event = QWheelEvent(
        QPointF(at), QPointF(widget.mapToGlobal(at)), QPoint(0, 0), QPoint(0, 120 * notches),
        Qt.MouseButton.NoButton, keys, Qt.ScrollPhase.NoScrollPhase, False,
    )  # fmt: skip
    QApplication.sendEvent(widget, event)


def view_point(plots: GpuPlots, t: float, y: float) -> QPoint:
    plots.grab()  # lay out and paint first: the mapping is the one on screen
    box = plots.plot_item(TEMP_GPU_C).getViewBox()
    return plots.mapFromScene(box.mapViewToScene(QPointF(t, y)))


def test_the_wheel_over_a_plot_scrolls_the_panel_and_leaves_time_alone(qtbot, panel) -> None:
    plots = panel.plots
    plots.show_series(filled_ring(), 0)
    panel.resize(700, 300)  # shorter than the plots: the panel scrolls
    page = panel.scroll_area.verticalScrollBar()
    qtbot.waitUntil(lambda: page.maximum() > 0, timeout=2000)
    assert page.value() == 0
    before = x_range(plots)
    wheel(plots.viewport(), view_point(plots, END_S - 300, 65.0), -2)  # over a curve, down
    assert page.value() > 0  # the page moved, as any page does under the wheel
    assert x_range(plots) == pytest.approx(before)  # time did not
    assert plots.window.live and panel.bar.live.text() == "● Live"
    assert not panel.bar.paused_note.isVisible()


def test_ctrl_wheel_zooms_time_around_the_cursor_and_says_it_paused(qtbot, panel) -> None:
    plots = panel.plots
    plots.show_series(filled_ring(), 0)
    util_y = plots.plot_item(UTIL_GPU_PCT).getViewBox().viewRange()[1]
    cursor_t = END_S - 300
    at = view_point(plots, cursor_t, 65.0)
    assert not panel.bar.paused_note.isVisible()
    wheel(plots.viewport(), at, 2, Qt.KeyboardModifier.ControlModifier)
    start, end = x_range(plots)
    assert end - start < 900 * 0.8  # zoomed in
    assert start < cursor_t < end
    # Around the cursor: the time under it keeps its place.
    assert (cursor_t - start) / (end - start) == pytest.approx(600 / 900, abs=0.02)
    assert not plots.window.live and panel.bar.live.text() == "❚❚ Paused"
    # Said in words under the range bar, not only by the button's face.
    assert panel.bar.paused_note.isVisible() and panel.bar.paused_note.text() == PAUSED_BY_ZOOM
    assert plots.plot_item(UTIL_GPU_PCT).getViewBox().viewRange()[1] == util_y  # y stays 0-100
    assert x_range(plots) == pytest.approx(
        tuple(plots.plot_item(POWER_W).getViewBox().viewRange()[0])
    )  # every plot follows
    plots.reset_zoom()  # what a double click and the menu's Reset zoom do
    assert plots.window.live and x_range(plots) == pytest.approx((END_S - 900, END_S))
    assert not panel.bar.paused_note.isVisible()


def test_a_pause_asked_for_by_name_needs_no_note(qtbot, panel) -> None:
    plots = panel.plots
    plots.show_series(filled_ring(), 0)
    qtbot.mouseClick(panel.bar.live, Qt.MouseButton.LeftButton)  # Paused, by its button
    assert not plots.window.live and not panel.bar.paused_note.isVisible()
    plots.choose_custom(END_S - 600, END_S - 60)
    assert not panel.bar.paused_note.isVisible()
    wheel(plots.viewport(), view_point(plots, END_S - 300, 65.0), 1,
          Qt.KeyboardModifier.ControlModifier)  # fmt: skip
    assert panel.bar.paused_note.isVisible()
    assert panel.bar.paused_note.text() == MOVED_IN_CUSTOM


def test_a_drag_pans_time_and_a_double_click_goes_back_to_live(qtbot, panel) -> None:
    plots = panel.plots
    plots.show_series(filled_ring(), 0)
    start = view_point(plots, END_S - 300, 65.0)
    end = view_point(plots, END_S - 200, 65.0)
    QTest.mousePress(plots.viewport(), Qt.MouseButton.LeftButton, pos=start)
    for k in range(1, 11):  # a real drag: moves with the button held
        QTest.mouseMove(plots.viewport(), start + (end - start) * k / 10)
    QTest.mouseRelease(plots.viewport(), Qt.MouseButton.LeftButton, pos=end)
    first, last = x_range(plots)
    assert last - first == pytest.approx(900)  # a pan keeps the span
    assert last == pytest.approx(END_S - 100, abs=10)  # dragged right: earlier times
    assert not plots.window.live and panel.bar.paused_note.isVisible()
    QTest.mouseDClick(plots.viewport(), Qt.MouseButton.LeftButton, pos=end)
    qtbot.waitUntil(lambda: plots.window.live, timeout=2000)
    assert x_range(plots) == pytest.approx((END_S - 900, END_S))


# The offscreen platform cannot grab the keyboard for a popup menu; harmless here.
@pytest.mark.qt_log_ignore("This plugin does not support grabbing the keyboard")
def test_our_context_menu_replaces_pyqtgraphs(qtbot, panel) -> None:
    plots = panel.plots
    plots.show_series(filled_ring(), 0)
    assert not plots.plot_item(TEMP_GPU_C).getViewBox().menuEnabled()
    with qtbot.waitSignal(plots.menuRequested, timeout=2000):
        qtbot.mouseClick(plots.viewport(), Qt.MouseButton.RightButton,
                         pos=view_point(plots, END_S - 100, 65.0))  # fmt: skip
    popup = QApplication.activePopupWidget()
    assert popup is not None and popup.objectName() == "plotMenu"
    popup.close()
    plots.set_live(False)
    menu = panel.context_menu()
    texts = [a.text() for a in menu.actions() if not a.isSeparator()]
    assert texts == ["Reset zoom", "Live", "Export visible range as CSV…"]
    assert all(a.isEnabled() for a in menu.actions())
    plots.choose_span(300.0)
    lines = panel.visible_csv().splitlines()
    assert lines[0] == "time,unix_s,Utilisation (%),Memory used (GiB),Temperature (°C),Power (W)"
    assert len(lines) == 1 + 301  # the header and every sample of the last 5 min
    assert lines[-1].split(",")[1] == f"{END_S:.3f}"


# Crosshair and thresholds --------------------------------------------------------------


def test_the_crosshair_names_every_curve_and_the_time(qtbot, panel) -> None:
    plots = panel.plots
    plots.show_series(filled_ring(), 0)
    t = END_S - 200
    QTest.mouseMove(plots.viewport(), view_point(plots, t, 65.0))
    qtbot.waitUntil(lambda: plots.crosshair.label.isVisible(), timeout=3000)
    assert plots.crosshair.time_s == pytest.approx(t, abs=2.0)
    shown_t = plots.crosshair.time_s
    nearest = round(shown_t - END_S) + END_S
    i = SAMPLES - 1 - round(END_S - nearest)
    text = plots.crosshair.label.textItem.toPlainText()
    assert time.strftime("%H:%M:%S", time.localtime(shown_t)) in text
    assert f"Temperature {temperature(i):.1f} °C" in text
    assert "Utilisation 50.0 %" in text and "Memory used 40.0 GiB" in text
    assert f"Power {300 + i % 7:.0f} W" in text
    assert all(line.isVisible() and line.value() == shown_t for line in plots.crosshair.lines)
    QApplication.sendEvent(plots, QEvent(QEvent.Type.Leave))  # the mouse leaves the plots
    assert not plots.crosshair.label.isVisible()


def test_warning_and_critical_lines_on_the_temperature_plot(panel) -> None:
    lines = panel.plots.threshold_lines[TEMP_GPU_C]
    assert [(line.value(), line.angle) for line in lines] == [(75.0, 0), (85.0, 0)]
    assert set(panel.plots.threshold_lines) == {TEMP_GPU_C}
    title = panel.plots.plot_item(TEMP_GPU_C).titleLabel.item.toPlainText()
    assert title == "Temperature (°C) · warning 75 critical 85"
    panel.plots.show_series(filled_ring(), 0)  # 60 to 79 °C: the warning line in sight
    panel.plots.grab()
    low, high = panel.plots.plot_item(TEMP_GPU_C).getViewBox().viewRange()[1]
    assert low < 75 < high < 85  # the lines do not stretch the axis


def test_the_time_axis_reads_local_times_even_before_data(qtbot, panel) -> None:
    plots = panel.plots
    for ring in (None, filled_ring()):
        plots.show_series(ring, 0)
        plots.grab()
        start, end = x_range(plots)
        assert end - start == pytest.approx(900)
        texts = [text for _, text in tick_texts(plots.plot_item(POWER_W).getAxis("bottom"))]
        assert len(texts) >= 2
        assert all(re.fullmatch(r"\d\d:\d\d(:\d\d)?", text) for text in texts), texts


# Geometry in the real window -----------------------------------------------------------

TARGET = "127.0.0.1:9"  # nothing listens: the window is fed by hand


def sample(gpu: int, tick: int) -> pb.GpuSample:
    return pb.GpuSample(
        index=gpu, health=pb.GPU_HEALTH_OK, temp_gpu_c=60 + 10 * math.sin(tick / 9),
        util_gpu_pct=80.0, mem_used_bytes=50 << 30, mem_total_bytes=80 << 30,
        power_w=500 + 90 * math.sin(tick / 5),
    )  # fmt: skip


def feed(window: MainWindow) -> None:
    fleet = window.session.fleet
    gpus = tuple(GpuInfo(i, f"GPU-{i}", "NVIDIA H100 80GB HBM3", None, None, 80 << 30, 700.0)
                 for i in range(8))  # fmt: skip
    info = NodeInfo("gpu-node-01", "550.90.07", "12.4", "0.1", "nvml", True, "", 1.0, gpus)
    fleet.apply_all([InventoryUpdate(TARGET, info), LinkUpdate(TARGET, LinkState.CONNECTED)])
    now_ms = int(time.time() * 1000)
    for tick in range(120):
        gpus = [sample(g, tick) for g in range(8)]
        batch = pb.SampleBatch(timestamp_unix_ms=now_ms - (120 - tick) * 1000, gpus=gpus)
        fleet.apply(decode_batch(TARGET, batch, 8))


@pytest.fixture
def window(qtbot) -> Iterator[MainWindow]:
    session = ConsoleSession([TARGET])
    session.connections.start()  # the network thread, dialing no node: fed by hand below
    window = MainWindow(session)
    qtbot.addWidget(window)
    feed(window)
    window.show()
    window.grid.select(TARGET, 3)
    yield window
    session.stop()


@pytest.mark.parametrize("size", [(1366, 768), (3840, 2160)])
def test_plots_stay_readable_at_any_window_size(qtbot, window, size) -> None:
    window.resize(*size)
    qtbot.waitUntil(lambda: window.size().width() == size[0], timeout=3000)
    plots = window.detail.plots
    assert plots.point_count() == 120
    window.grab()  # lay out and paint everything at this size
    items = [plots.plot_item(m) for m in plots.curves]
    heights = [item.geometry().height() for item in items]
    assert all(h >= MIN_PLOT_HEIGHT for h in heights), heights
    scroll = window.detail.plot_panel.scroll_area
    if scroll.viewport().height() < plots.minimumHeight():
        assert scroll.verticalScrollBar().maximum() > 0  # short: it scrolls, never squeezes
    for item in items:
        axis = item.getAxis("left")
        assert axis.width() == 48
        rects = [rect for rect, _ in tick_texts(axis)]
        assert len(rects) >= 2, (item.titleLabel.text, axis.height(), axis.range, tick_texts(axis))
        for a, b in itertools.combinations(rects, 2):
            assert not a.intersects(b), (item.titleLabel.text, a, b)


# A past moment (incident replay) ------------------------------------------------------


def count_set_data(plots: GpuPlots, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the temperature curve's setData calls from now on."""
    calls: list[int] = []
    curve = plots.curves[TEMP_GPU_C]
    set_data = curve.setData

    def counted(*args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        calls.append(1)
        set_data(*args, **kwargs)

    monkeypatch.setattr(curve, "setData", counted)
    return calls


def test_a_moving_past_moment_moves_the_range_without_drawing_the_curves_again(
    qtbot, panel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Play moves the moment every frame: the curves already hold the ring, so only the
    range and the moment's line move (a new setData rebuilt every curve's path)."""
    plots = panel.plots
    ring = filled_ring()
    plots.show_series(ring, 0)
    calls = count_set_data(plots, monkeypatch)
    for k, at in enumerate((END_S - 600, END_S - 570, END_S - 540)):
        plots.show_moment(at)
        start, end = x_range(plots)
        assert start < at < end and plots.moment_lines[0].value() == at
        if k:
            assert not calls
        calls.clear()  # the first moment changes the range from live: no new data either
    x, _ = plots.curves[TEMP_GPU_C].getOriginalDataset()
    assert x[-1] == END_S  # what the curve holds: the whole ring


def a_sample_arrives_while_past(
    plots: GpuPlots, back_s: float, monkeypatch: pytest.MonkeyPatch
) -> tuple[SampleRing, list[int]]:
    """A moment `back_s` before the ring's newest shown; a sample arrives and the moment
    moves a second on: the ring, and the temperature curve's setData calls meanwhile."""
    ring = filled_ring()
    plots.show_series(ring, 0)
    plots.show_moment(END_S - back_s)
    calls = count_set_data(plots, monkeypatch)
    ring.append(END_S + 1, np.full((1, COLUMN_COUNT), 99.0, dtype=np.float32), 1.0)
    plots.show_moment(END_S - back_s + 1)
    return ring, calls


def test_a_past_range_that_shows_the_ring_draws_its_new_samples(
    qtbot, panel, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, calls = a_sample_arrives_while_past(panel.plots, 60, monkeypatch)  # the range: the ring
    assert calls
    x, y = panel.plots.curves[TEMP_GPU_C].getOriginalDataset()
    assert x[-1] == END_S + 1 and y[-1] == 99.0


def test_a_past_range_before_the_ring_draws_nothing_again_as_the_ring_grows(
    qtbot, panel, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An hour before the ring's first sample.
    ring, calls = a_sample_arrives_while_past(panel.plots, 5000, monkeypatch)
    assert not calls and ring.first_time > x_range(panel.plots)[1]
