"""The dark and light themes: contrast of every text pair, the same widgets styled in
both, the tiles' text readable on every fill, and a switch at run time that restyles
the application (menus included, as rendered) and the plots."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QEvent, QObject, QPoint
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication, QMenu, QWidget

from console.main_window import MainWindow
from console.session import ConsoleSession
from console.settings import SettingsError, load_settings
from console.views.common import theme as themes
from console.views.common.theme import DARK, LIGHT, THEMES, ThemeError, contrast, resolve
from console.views.grid.tile_colors import STOPS, scale_color
from console.views.grid.tile_painter import TEXT
from console.views.window.looks import Looks, apply_to_app
from tests.console.qss_pairs import pairs, selectors

# A popup menu grabs the keyboard and raises itself; offscreen says it cannot.
pytestmark = pytest.mark.qt_log_ignore(
    "This plugin does not support (grabbing the keyboard|raise)", extend=True
)
BODY = 4.5  # WCAG 2 AA, body text
# WCAG exempts inactive controls; we still keep disabled text legible, not "light grey".
DISABLED = 3.0
# What every theme must style: the complaints were light menus on the dark theme.
MUST_STYLE = ("QMenu", "QMenu::item:selected", "QMenu::item:disabled", "QSpinBox", "QComboBox",
              "QComboBox QAbstractItemView", "QAbstractItemView", "QHeaderView::section",
              "QToolTip", "QScrollBar::handle", "QTableView", "QTabBar::tab")  # fmt: skip


@pytest.fixture
def dark_again(qapp) -> Iterator[None]:  # type: ignore[no-untyped-def]
    """The application's theme is process-wide: dark again for the tests after this one."""
    yield
    apply_to_app(DARK)


# -- colours, without a window ---------------------------------------------------------


@pytest.mark.parametrize("theme", THEMES.values(), ids=THEMES.keys())
def test_every_palette_pair_meets_aa(theme: themes.Theme) -> None:
    low = {name: round(contrast(fg, bg), 2) for name, (fg, bg) in theme.color_pairs().items()
           if contrast(fg, bg) < BODY}  # fmt: skip
    assert low == {}


@pytest.mark.parametrize("theme", THEMES.values(), ids=THEMES.keys())
def test_every_stylesheet_text_pair_meets_aa(theme: themes.Theme) -> None:
    found = pairs(theme.stylesheet(), theme.window)
    assert len(found) > 40  # the parser read the sheet
    low = [
        (p.selector, p.foreground, p.background, round(contrast(p.foreground, p.background), 2))
        for p in found
        if contrast(p.foreground, p.background) < (DISABLED if p.disabled else BODY)
    ]
    assert low == []


def test_both_themes_style_the_same_widgets_and_the_ones_that_were_unstyled() -> None:
    dark, light = selectors(DARK.stylesheet()), selectors(LIGHT.stylesheet())
    assert dark == light, (dark - light, light - dark)
    assert [s for s in MUST_STYLE if s not in dark] == []


@pytest.mark.parametrize("scale", list(STOPS), ids=[s.value for s in STOPS])
def test_tile_text_is_readable_on_every_fill(scale) -> None:  # type: ignore[no-untyped-def]
    stops = STOPS[scale]
    low, high = int(stops[0][0]) - 5, int(stops[-1][0]) + 5
    worst = min(
        (contrast(TEXT.name(), scale_color(float(v), stops).name()), v) for v in range(low, high)
    )
    assert worst[0] >= BODY, f"{scale.value} {worst[1]}: {worst[0]:.2f}:1"


def test_auto_follows_the_desktop_and_falls_back_to_dark() -> None:
    assert resolve("auto", True) is DARK
    assert resolve("auto", False) is LIGHT
    assert resolve("auto", None) is DARK  # the desktop says nothing: the NOC's dark
    assert resolve("light", True) is LIGHT and resolve("dark", False) is DARK
    with pytest.raises(ThemeError, match="auto, dark, light, not 'blue'"):
        resolve("blue", None)


def test_the_theme_setting(isolated_config: Path) -> None:
    path = isolated_config / "console.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('theme = "light"\n[profiles.a]\nnodes = ["h:1"]\n')
    settings = load_settings(path)
    assert settings.profile("a").theme == "light" and settings.profile().theme == "light"
    path.write_text('nodes = ["h:1"]\n')
    assert load_settings(path).profile().theme == "auto"
    path.write_text('theme = "Dark"\n')
    with pytest.raises(SettingsError, match=r"'theme' must be one of auto, dark, light, not 'Da"):
        load_settings(path)


# -- the switch, rendered ------------------------------------------------------------------


def menu_image(qtbot) -> tuple[QMenu, QColor, QColor]:  # type: ignore[no-untyped-def]
    """A context menu as the theme renders it: its background and its disabled entry's ink."""
    menu = QMenu()
    qtbot.addWidget(menu)
    menu.addAction("Enabled entry")
    disabled = menu.addAction("WWWWWWWWWWWWWWWW")
    disabled.setEnabled(False)
    menu.popup(QPoint(10, 10))
    qtbot.waitExposed(menu)
    image = menu.grab().toImage()
    background = image.pixelColor(image.width() // 2, 4)  # inside the border, above the items
    rect = menu.actionGeometry(disabled)
    ratio = image.devicePixelRatio()
    inks = [
        image.pixelColor(int(x * ratio), int(rect.center().y() * ratio))
        for x in range(rect.left() + 20, rect.right() - 20)
    ]
    ink = max(inks, key=lambda c: abs(c.lightness() - background.lightness()))
    menu.close()
    return menu, background, ink


@pytest.mark.usefixtures("dark_again")
def test_context_menus_follow_the_theme_as_rendered(qtbot) -> None:  # type: ignore[no-untyped-def]
    widget = QWidget()
    qtbot.addWidget(widget)
    looks = Looks(widget, "dark")
    _, dark_bg, dark_ink = menu_image(qtbot)
    assert dark_bg.name() == "#2d3748"  # dark.qss's QMenu, not the light default palette
    looks.set_choice("light")
    _, light_bg, light_ink = menu_image(qtbot)
    assert light_bg.name() == "#e2e8f0"
    for ink, bg in ((dark_ink, dark_bg), (light_ink, light_bg)):
        # Antialiased glyphs: the darkest/lightest pixel of the text, against the menu.
        assert contrast(ink.name(), bg.name()) >= DISABLED, (ink.name(), bg.name())


@pytest.mark.usefixtures("dark_again")
def test_a_switch_restyles_the_application_and_the_plots(qtbot) -> None:  # type: ignore[no-untyped-def]
    window = MainWindow(ConsoleSession(["127.0.0.1:1"]))
    qtbot.addWidget(window)
    looks = Looks(window, "dark")
    plots = window.detail.plots
    assert plots.backgroundBrush().color().name() == DARK.plot_background
    with qtbot.waitSignal(looks.themeChanged) as switched:
        looks.pick("light")
    assert switched.args == ["light"] and looks.picked
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    assert app.palette().color(QPalette.ColorRole.Window).name() == LIGHT.window
    assert app.styleSheet().startswith(LIGHT.stylesheet())
    assert themes.current() is LIGHT
    assert plots.backgroundBrush().color().name() == LIGHT.plot_background
    for plot in plots._plots.values():
        axis = plot.getAxis("left")
        assert axis.textPen().color().name() == LIGHT.plot_foreground
        assert plot.titleLabel.opts["color"] == LIGHT.plot_foreground
    looks.set_extra("wall", "QWidget { font-size: 15pt; }")
    looks.set_choice("dark")  # extra rules ride on every theme
    assert app.styleSheet().startswith(DARK.stylesheet()) and "15pt" in app.styleSheet()
    assert plots.backgroundBrush().color().name() == DARK.plot_background


def test_auto_asks_the_desktop(qtbot) -> None:  # type: ignore[no-untyped-def]
    """Here (no desktop) Qt says Unknown: auto shows dark; what Qt says is what is shown."""
    widget = QWidget()
    qtbot.addWidget(widget)
    looks = Looks(widget, "auto")
    scheme = QGuiApplication.styleHints().colorScheme()
    assert looks.theme is resolve("auto", {2: True, 1: False}.get(scheme.value))


def test_the_theme_the_application_has_already_repolishes_nothing(qtbot) -> None:  # type: ignore[no-untyped-def]
    """Qt repolishes every widget of the application on each style sheet set: a window
    built in the theme the application has (the console's start, most tests) sets none."""
    widget = QWidget()
    qtbot.addWidget(widget)
    widget.show()
    changes: list[QEvent.Type] = []
    restyled = (QEvent.Type.StyleChange, QEvent.Type.PaletteChange, QEvent.Type.FontChange)

    class Count(QObject):
        def eventFilter(self, watched: QObject, event: QEvent) -> bool:
            if event.type() in restyled:
                changes.append(event.type())
            return False

    counter = Count()
    widget.installEventFilter(counter)
    try:
        apply_to_app(LIGHT)
        assert changes  # another theme: restyled
        changes.clear()
        apply_to_app(LIGHT)
        assert changes == []  # the same again: left alone
        apply_to_app(LIGHT, extra="QWidget { font-size: 20px; }")  # wall mode's rules: set
        assert changes
    finally:
        apply_to_app(DARK)
