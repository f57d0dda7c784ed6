"""The usage charts' names stay apart however narrow the chart (issue #33's screenshots:
in a 1366x768 window eight users' names ran together under upright bars)."""

from __future__ import annotations

from PySide6.QtCore import QRectF
from PySide6.QtGui import QImage, QPainter
from PySide6.QtWidgets import QApplication

from console.fleet.usage import HOUR, UsageRow
from console.views.reports.usage_charts import UsageCharts

USERS = ["alice", "bob", "otto", "carol", "dmitri", "erin", "farid", "team:vision"]


def label_rects(charts: UsageCharts, name: str) -> list[tuple[str, QRectF]]:
    axis = charts.plots[name].getAxis("left")
    image = QImage(4, 4, QImage.Format.Format_ARGB32)
    painter = QPainter(image)
    try:
        specs = axis.generateDrawSpecs(painter)
    finally:
        painter.end()
    assert specs is not None
    return [(text, axis.mapRectToScene(rect)) for rect, _flags, text in specs[2]]


def test_every_name_is_shown_apart_biggest_on_top(qtbot) -> None:  # type: ignore[no-untyped-def]
    charts = UsageCharts()
    qtbot.addWidget(charts)
    charts.resize(640, 260)  # three charts: about 210 px each, as beside the usage table
    charts.show()
    rows = [UsageRow(user, gpu_seconds=(len(USERS) - i) * 50 * HOUR)
            for i, user in enumerate(USERS)]  # fmt: skip
    charts.show_report([UsageRow("team:ml", gpu_seconds=900 * HOUR)], rows)
    QApplication.processEvents()
    labels = label_rects(charts, "users")
    assert [text for text, _ in labels] and {t for t, _ in labels} == set(USERS)
    for i, (a, ra) in enumerate(labels):
        for b, rb in labels[i + 1 :]:
            overlap = ra.intersected(rb)
            assert overlap.width() < 0.5 or overlap.height() < 0.5, (a, b)
    by_height = sorted(labels, key=lambda pair: pair[1].top())
    assert by_height[0][0] == "alice"  # the most GPU-hours first, at the top
    assert charts.shown["users"][0] == ("alice", 400.0)
