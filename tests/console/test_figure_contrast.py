"""Figures readable on the theme: the usage KPIs and the audit count meet WCAG AA
(4.5:1) against what is drawn behind them, as the application's theme renders them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest
from PySide6.QtCore import QPoint, QRect
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QApplication, QLabel

from console.app import qt_application
from console.main_window import MainWindow
from console.session import ConsoleSession
from console.views.common.theme import THEMES
from console.views.window.looks import apply_to_app


def luminance(colour: QColor) -> float:
    def channel(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    return (
        0.2126 * channel(colour.redF())
        + 0.7152 * channel(colour.greenF())
        + 0.0722 * (channel(colour.blueF()))
    )


def contrast(a: QColor, b: QColor) -> float:
    """WCAG 2's contrast ratio: 1 (none) to 21 (black on white)."""
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def rendered_contrast(label: QLabel) -> float:
    """The label as drawn: its background (the commonest pixel) against its text (the
    pixel farthest from it)."""
    window = label.window()  # as on screen: whatever paints behind the label shows
    image = window.grab(QRect(label.mapTo(window, QPoint(0, 0)), label.size())).toImage()
    pixels = Counter(image.pixel(x, y) for x in range(image.width())
                     for y in range(image.height()))  # fmt: skip
    background = QColor(pixels.most_common(1)[0][0])
    return max(contrast(QColor(p), background) for p in pixels)


@pytest.fixture(params=["dark", "light"])
def themed_app(qapp: QApplication, request: pytest.FixtureRequest) -> Iterator[QApplication]:
    """The application styled as the console styles it, in each theme; restored after."""
    palette, sheet = qapp.palette(), qapp.styleSheet()
    app = qt_application()  # what `gpufleet console` applies first (dark)
    apply_to_app(THEMES[request.param])
    yield app
    apply_to_app(THEMES["dark"])
    qapp.setStyleSheet(sheet)
    qapp.setPalette(palette)


def test_usage_kpis_and_the_audit_count_meet_wcag_aa(qtbot, themed_app) -> None:
    window = MainWindow(ConsoleSession([]))
    qtbot.addWidget(window)
    window.resize(1366, 768)
    window.show()
    usage, audit = window.reports.usage_panel, window.reports.audit_panel
    audit.pages.setCurrentWidget(audit.log_page)
    for panel, label in ((usage, usage.kpis), (audit, audit.status)):
        window.tabs.setTabVisible(window.tabs.indexOf(panel), True)
        window.tabs.setCurrentWidget(panel)
        label.setText("0.0 GPU-h observed · mean utilisation 52.6 % · 12 records")
        qtbot.waitUntil(label.isVisible, timeout=5000)
        ratio = rendered_contrast(label)
        assert ratio >= 4.5, f"{label.objectName()}: {ratio:.2f}:1"
