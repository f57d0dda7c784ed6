"""Render every new view of the console (#16) at 1366x768 and 3840x2160, dark and light,
in a real X server (Xvfb + openbox), against demo daemons.

    PYTHONPATH=. .venv/bin/python docs/screenshots/views_screenshots.py [OUT_DIR] \
        [--theme dark|light] [--size 1366|4k]

(Needs Xvfb, openbox and xdotool: installer/dev-setup.sh test.) Without --theme both themes, without
--size both screens.

For each screen size a fresh Xvfb of exactly that size with openbox on it, the demo's
four simulated GPU servers (console/demo_fleet.py, as `gpufleet demo` starts them: a day
of history, its users' running and queued workloads, three reservations, the incident on
gpu-node-02) and the console on them as a first start shows it (maximised, the docks
shared out for the screen; a fresh config directory), gpu-node-01 GPU 4 open (bob's
eval-sweep). For each theme
it writes, with TAG 1366 or 4k:

- main-THEME-TAG.png: the grid, the GPU detail and its plots;
- detail-THEME-TAG.png: the whole GPU detail (it scrolls in the window): facts,
  readings, health, plots, processes;
- reservations-THEME-TAG.png: the Reservations tab;
- workloads-THEME-TAG.png: the Workloads tab, the fleet queue with its wait reasons;
- inventory-THEME-TAG.png: the Inventory tab, every GPU's versions and serials;
- search-THEME-TAG.png: Ctrl+F, "bob" typed, the first match selected;
- wall-THEME-TAG.png: wall mode (full screen);
- compact-THEME-TAG.png: 1,000 GPUs (125 nodes, synthetic samples, no daemons) as
  compact tiles.

The demo's workloads end with its daemons.
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path

ARGS = sys.argv[1:]
OUT = Path(ARGS[0]) if ARGS and not ARGS[0].startswith("--") else (
    Path(__file__).resolve().parent
)  # fmt: skip
SCREENS = {"1366": (1366, 768), "4k": (3840, 2160)}
THEMES = ("dark", "light")


def option(name: str) -> str | None:
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else None


def themes() -> tuple[str, ...]:
    chosen = option("--theme")
    if chosen is None:
        return THEMES
    if chosen not in THEMES:
        raise SystemExit(f"--theme {chosen}: expected one of {', '.join(THEMES)}")
    return (chosen,)


def shoot(tag: str) -> None:
    """In the X server of this process's DISPLAY: the daemon-backed pictures of one size."""
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QApplication
    from shot_tools import demo_first_start, settle, wait_until
    from theme_screenshots import save  # the same OUT, from the same arguments

    from console.fleet.updates import LinkState

    with demo_first_start() as (app, demo, window, looks):
        session = window.session
        fleet = session.fleet
        wait_until(app, lambda: all(n.state is LinkState.CONNECTED and len(n.latest) == 8
                                    for n in fleet), 60)  # fmt: skip
        first = demo.targets[0]
        # The demo's three reservations and bob's eval-sweep on gpu-node-01 GPU 4.
        wait_until(app, lambda: len(fleet.control.reservations()) == 3
                   and fleet.control.running_on(first, 4) is not None, 30)  # fmt: skip
        window.grid.select(first, 4)
        table = window.detail.processes
        wait_until(app, lambda: table.rowCount() > 0
                   and table.process(0).cpu_pct is not None, 30)  # fmt: skip
        settle(app, 10)  # a few plot points, the SM and CPU shares, the layout done
        screen = QApplication.primaryScreen().geometry()
        try:
            for theme in themes():
                looks.looks.set_choice(theme)
                window.tabs.setCurrentWidget(window.alerts.alerts_tab)
                window.grid.select(first, 4)
                settle(app, 2)
                save(window, f"main-{theme}-{tag}.png")
                save(window.detail, f"detail-{theme}-{tag}.png")
                window.tabs.setCurrentWidget(window.control.reservations_panel)
                settle(app, 1)
                save(window, f"reservations-{theme}-{tag}.png")
                window.tabs.setCurrentIndex(window.tabs.indexOf(
                    window.tabs.widget(2)))  # "Workloads": the fleet queue  # fmt: skip
                settle(app, 1)
                save(window, f"workloads-{theme}-{tag}.png")
                window.tabs.setCurrentWidget(window.reports.inventory_panel)
                settle(app, 2)  # its columns fitted once it shows
                save(window, f"inventory-{theme}-{tag}.png")
                window.tabs.setCurrentWidget(window.alerts.alerts_tab)
                window.activateWindow()
                wait_until(app, lambda: QApplication.activeWindow() is window, 10)
                QTest.keyClick(window, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
                wait_until(
                    app, lambda: QApplication.focusWidget() is window.grid_part.search.line, 10
                )
                window.grid_part.search.line.clear()
                QTest.keyClicks(
                    window.grid_part.search.line, "bob"
                )  # a user: processes, reservations
                settle(app, 1)
                save(window, f"search-{theme}-{tag}.png")
                QTest.keyClick(window.grid_part.search.line, Qt.Key.Key_Escape)
                # Emptied as a user does (an edit), so the match line empties too.
                QTest.keyClick(
                    window.grid_part.search.line, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier
                )
                QTest.keyClick(window.grid_part.search.line, Qt.Key.Key_Backspace)
                looks.wall.set_on(True)
                try:
                    wait_until(app, lambda: window.geometry() == screen, 10)
                except TimeoutError:
                    print(f"wall mode: the window is {window.width()}x{window.height()}")
                settle(app, 2)
                save(window, f"wall-{theme}-{tag}.png")
                looks.wall.set_on(False)
                settle(app, 1)
        finally:
            window.close()
            session.stop()


def shoot_compact(tag: str) -> None:
    """1,000 GPUs of synthetic samples (no daemons) in a maximised window: compact tiles."""
    from density_screenshots import feed, targets
    from shot_tools import settle, wait_until
    from theme_screenshots import save  # the same OUT, from the same arguments

    from console.app import qt_application
    from console.main_window import MainWindow
    from console.session import ConsoleSession
    from console.views.window.first_layout import fit_to_screen
    from console.views.window.window_looks import WindowLooks

    app = qt_application()
    nodes = targets(125)
    session = ConsoleSession(nodes)
    session.connections.start()  # the network thread, connected to nothing
    window = MainWindow(session)
    # The first start's layout, as build_window gives it (console/app.py).
    looks = WindowLooks(window, f"views-compact-{tag}", "dark",
                        first_start=partial(fit_to_screen, window))  # fmt: skip
    window.show()
    feed(window, nodes)
    wait_until(app, lambda: window.grid_part.summary.parts["hottest"].isVisible(), 10)
    window.grid.select(nodes[40], 3)
    for theme in themes():
        looks.looks.set_choice(theme)
        settle(app, 2)
        save(window, f"compact-{theme}-{tag}.png")
    window.close()
    session.stop()


def main() -> int:
    themes()  # a bad --theme fails before any X server starts
    if "--screen" in sys.argv:  # the child: one screen size, in the X server it was given
        tag = option("--screen") or ""
        (shoot_compact if "--compact" in sys.argv else shoot)(tag)
        return 0
    OUT.mkdir(parents=True, exist_ok=True)
    passed = [str(OUT)] + (["--theme", option("--theme") or ""] if option("--theme") else [])
    sizes = [option("--size")] if option("--size") else list(SCREENS)
    for tag in sizes:
        if tag not in SCREENS:
            raise SystemExit(f"--size {tag}: expected one of {', '.join(SCREENS)}")
        width, height = SCREENS[tag]
        from shot_tools import in_x_server

        runs = [[sys.executable, __file__, *passed, "--screen", tag, *extra]
                for extra in ([], ["--compact"])]  # fmt: skip
        in_x_server(width, height, runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
