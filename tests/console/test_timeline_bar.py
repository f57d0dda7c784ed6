"""The replay strip's timeline bar draws its track and marks once: a cursor move (Play
moves it every frame) repaints only the cursor's old and new place, and what it shows
is still every mark and the cursor where it now stands.

A real TimelineBar, shown, its paint events watched with an event filter and its pixels
read from grab().
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QRect
from PySide6.QtGui import QColor, QPaintEvent, QRegion

from console.fleet.timeline import EventMark
from console.views.replay import timeline_bar
from console.views.replay.timeline_bar import CURSOR, MARK_COLORS, TimelineBar
from gpufleet.v1.alert_severity import Severity

START, END = 1_800_000_000_000, 1_800_003_600_000  # an hour, Unix ms


class Paints(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.region = QRegion()
        self.count = 0

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if isinstance(event, QPaintEvent):
            self.count += 1
            self.region = self.region.united(event.region())
        return False


def shown_bar(qtbot, marks_drawn: list[int]) -> TimelineBar:
    bar = TimelineBar()
    qtbot.addWidget(bar)
    bar.resize(600, 30)
    bar.set_span(START, END)
    marks = [(START + m * 60_000, Severity.CRITICAL) for m in range(0, 60, 5)]
    events = [EventMark(START + 30 * 60_000, "drained", "gpu-a GPU 0: drained by carol")]
    bar.set_marks(marks, events)
    draw = bar._draw_marks

    def counted() -> object:
        marks_drawn.append(1)
        return draw()

    bar._draw_marks = counted  # type: ignore[method-assign]
    bar.show()
    qtbot.waitExposed(bar)
    qtbot.waitUntil(lambda: bool(marks_drawn), timeout=3000)
    return bar


def colour_at(bar: TimelineBar, x: int) -> QColor:
    image = bar.grab().toImage()
    ratio = image.devicePixelRatio()
    return image.pixelColor(round(x * ratio), round(bar._track().center().y() * ratio))


def test_a_cursor_move_repaints_the_cursor_only_and_draws_no_mark_again(qtbot) -> None:
    drawn: list[int] = []
    bar = shown_bar(qtbot, drawn)
    paints = Paints()
    bar.installEventFilter(paints)
    before = len(drawn)
    old_x = bar.cursor_x()  # live: the window's end
    bar.set_cursor(START + 42 * 60_000)
    qtbot.waitUntil(lambda: paints.count > 0, timeout=3000)
    new_x = bar.cursor_x()
    half = timeline_bar.CURSOR_HALF
    cursor_places = QRegion(QRect(old_x - half, 0, 2 * half + 1, bar.height())).united(
        QRegion(QRect(new_x - half, 0, 2 * half + 1, bar.height()))
    )
    assert paints.region.subtracted(cursor_places).isEmpty()
    assert len(drawn) == before  # the marks came from the pixmap
    assert colour_at(bar, new_x) == CURSOR
    tick = bar.x_of(START + 10 * 60_000)
    assert colour_at(bar, tick) == MARK_COLORS[Severity.CRITICAL]


def test_new_marks_a_new_window_or_a_new_size_draw_the_marks_again(qtbot) -> None:
    drawn: list[int] = []
    bar = shown_bar(qtbot, drawn)
    before = len(drawn)
    bar.set_marks([(START + 7 * 60_000, Severity.WARNING)], [])
    qtbot.waitUntil(lambda: len(drawn) == before + 1, timeout=3000)
    assert colour_at(bar, bar.x_of(START + 7 * 60_000)) == MARK_COLORS[Severity.WARNING]
    assert colour_at(bar, bar.x_of(START + 10 * 60_000)) != MARK_COLORS[Severity.CRITICAL]
    bar.set_span(START - 3_600_000, END)  # two hours: the tick moves left
    qtbot.waitUntil(lambda: len(drawn) == before + 2, timeout=3000)
    assert colour_at(bar, bar.x_of(START + 7 * 60_000)) == MARK_COLORS[Severity.WARNING]
    bar.resize(900, 30)
    qtbot.waitUntil(lambda: len(drawn) == before + 3, timeout=3000)
    assert colour_at(bar, bar.x_of(START + 7 * 60_000)) == MARK_COLORS[Severity.WARNING]
    bar.set_span(START - 3_600_000, END)  # the same window: nothing to draw again
    bar.set_cursor(START)
    qtbot.waitUntil(lambda: colour_at(bar, bar.x_of(START)) == CURSOR, timeout=3000)
    assert len(drawn) == before + 3
