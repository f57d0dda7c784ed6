"""Render the looks screenshots of docs/console.md in a real X server (Xvfb + openbox).

    PYTHONPATH=. .venv/bin/python docs/screenshots/theme_screenshots.py [OUT_DIR]

For each screen, 1366x768 and 3840x2160, a fresh Xvfb of exactly that size with
openbox on it, the demo's four simulated GPU servers (console/demo_fleet.py, as
`gpufleet demo` starts them) and the console on them through Qt's xcb platform as
a first start shows it (maximised, a fresh config directory), a GPU open:
the dark theme, the light theme, and wall mode (full screen, on the dark
theme). Writes theme-dark-1366.png, theme-light-1366.png, wall-1366.png and
the same with -4k. Needs Xvfb, openbox and xdotool (installer/dev-setup.sh test).
"""

from __future__ import annotations

import sys
from pathlib import Path

OUT = Path(sys.argv[1]) if len(sys.argv) > 1 and not sys.argv[1].startswith("--") else (
    Path(__file__).resolve().parent
)  # fmt: skip
SCREENS = {"1366": (1366, 768), "4k": (3840, 2160)}


def shoot(tag: str) -> None:
    """In the X server of this process's DISPLAY: the three pictures of one screen size."""
    from PySide6.QtWidgets import QApplication
    from shot_tools import demo_first_start, settle, wait_until

    from console.fleet.updates import LinkState

    with demo_first_start() as (app, _demo, window, looks):
        session = window.session
        wait_until(app, lambda: all(n.state is LinkState.CONNECTED and n.latest
                                    for n in session.fleet), 60)  # fmt: skip
        window.grid.select(session.fleet.nodes()[1].target, 2)  # as `gpufleet demo` opens
        settle(app, 12)  # a few plot points, the layout done
        for name in ("dark", "light"):
            looks.looks.set_choice(name)
            settle(app, 2)
            save(window, f"theme-{name}-{tag}.png")
        looks.looks.set_choice("dark")
        looks.wall.set_on(True)
        screen = QApplication.primaryScreen().geometry()
        try:
            wait_until(app, lambda: window.geometry() == screen, 10)
        except TimeoutError:  # a window whose least size exceeds the screen
            print(f"wall mode: the window is {window.width()}x{window.height()}, the screen "
                  f"{screen.width()}x{screen.height()}")  # fmt: skip
        settle(app, 3)
        save(window, f"wall-{tag}.png")
        looks.wall.set_on(False)
        window.close()
        session.stop()


def save(widget: object, name: str) -> None:
    from PySide6.QtWidgets import QWidget
    from shot_tools import save_grab

    assert isinstance(widget, QWidget)
    save_grab(widget, OUT / name)


def main() -> int:
    if "--screen" in sys.argv:  # the child: one screen size, in the X server it was given
        shoot(sys.argv[sys.argv.index("--screen") + 1])
        return 0
    for tag, (width, height) in SCREENS.items():
        from shot_tools import in_x_server

        in_x_server(width, height, [[sys.executable, __file__, str(OUT), "--screen", tag]], 300)
    return 0


if __name__ == "__main__":
    sys.exit(main())
