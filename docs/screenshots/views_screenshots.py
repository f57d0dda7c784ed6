"""Render every new view of the console (#16) at 1366x768 and 3840x2160, dark and light,
in a real X server (Xvfb + openbox), against demo daemons.

    PYTHONPATH=. .venv/bin/python docs/screenshots/views_screenshots.py [OUT_DIR] \
        [--theme dark|light] [--size 1366|4k]

(As root: the workloads run as their owners, the tests' local accounts. Needs Xvfb,
openbox and xdotool: installer/dev-setup.sh test.) Without --theme both themes, without
--size both screens.

For each screen size a fresh Xvfb of exactly that size with openbox on it, four
simulated GPU servers (8 GPUs each) with reservations, one running workload and two
queued ones, and the console on them maximised by the window manager. For each theme
it writes, with TAG 1366 or 4k:

- main-THEME-TAG.png: the grid, the GPU detail and its plots;
- detail-THEME-TAG.png: the whole GPU detail (it scrolls in the window): facts,
  readings, health, plots, processes;
- reservations-THEME-TAG.png: the Reservations tab;
- workloads-THEME-TAG.png: the Workloads tab, the fleet queue with its wait reasons;
- inventory-THEME-TAG.png: the Inventory tab, every GPU's versions and serials;
- search-THEME-TAG.png: Ctrl+F, a user typed, the first match selected;
- wall-THEME-TAG.png: wall mode (full screen);
- compact-THEME-TAG.png: 1,000 GPUs (125 nodes, synthetic samples, no daemons) as
  compact tiles.

Every workload it started is cancelled before the daemons stop.
"""

from __future__ import annotations

import os
import subprocess
import sys
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


def stage(stubs: list[object]) -> list[tuple[object, str]]:
    """Reservations across two nodes, one workload running and two waiting in the queue."""
    from shot_tools import reserve_in_use

    from gpufleet.v1 import node_pb2 as pb

    first, second = stubs[0], stubs[1]
    reserve_in_use(first, second)  # type: ignore[arg-type]
    started = []
    request = pb.SubmitWorkloadRequest(name="train-resnet", argv=["sleep", "600"], owner="bob",
                                       gpu_count=1, actor="bob")  # fmt: skip
    workload = first.SubmitWorkload(request, timeout=5).id  # type: ignore[attr-defined]
    first.AssignWorkload(pb.AssignWorkloadRequest(workload_id=workload, gpu_indices=[1],  # type: ignore[attr-defined]
                                                  actor="bob"), timeout=5)  # fmt: skip
    started.append((first, workload))
    for stub, name, owner, count in ((first, "llama-70b-finetune", "carol", 8),
                                     (second, "eval-sweep", "alice", 6)):  # fmt: skip
        queued = pb.SubmitWorkloadRequest(name=name, argv=["sleep", "600"], owner=owner,
                                          gpu_count=count, actor=owner)  # fmt: skip
        started.append((stub, stub.SubmitWorkload(queued, timeout=5).id))  # type: ignore[attr-defined]
    return started


def shoot(tag: str) -> None:
    """In the X server of this process's DISPLAY: the daemon-backed pictures of one size."""
    import grpc
    from control_screenshots import PEOPLE
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QApplication, QDockWidget
    from shot_tools import settle, wait_until
    from theme_screenshots import save  # the same OUT, from the same arguments

    from console.app import build_window, qt_application
    from console.demo_fleet import DemoFleet
    from console.fleet.updates import LinkState
    from console.views.window.window_looks import WindowLooks
    from gpufleet.v1 import node_pb2 as pb
    from gpufleet.v1 import node_pb2_grpc as pb_grpc
    from tests.accounts import TEST_ACCOUNTS, local_accounts

    app = qt_application()
    with local_accounts(TEST_ACCOUNTS), DemoFleet(nodes=4, gpus=8) as fleet_d:
        targets = fleet_d.start()
        channels = [grpc.insecure_channel(t) for t in targets]
        stubs = [pb_grpc.NodeServiceStub(c) for c in channels]
        profile = f"views-shots-{tag}-{os.getpid()}"  # a fresh profile: no remembered layout
        window = build_window(targets, PEOPLE, profile=profile, theme="dark")
        looks = window.findChild(WindowLooks)
        assert isinstance(looks, WindowLooks)
        window.showMaximized()
        session = window.session
        fleet = session.fleet
        wait_until(app, lambda: all(n.state is LinkState.CONNECTED and len(n.latest) == 8
                                    for n in fleet), 60)  # fmt: skip
        started = stage(stubs)
        try:
            first = targets[0]
            wait_until(app, lambda: len(fleet.control.reservations()) == 4
                       and fleet.control.running_on(first, 1) is not None, 30)  # fmt: skip
            window.grid.select(first, 1)
            table = window.detail.processes
            wait_until(app, lambda: table.rowCount() > 0
                       and table.process(0).cpu_pct is not None, 30)  # fmt: skip
            settle(app, 10)  # a few plot points, the SM and CPU shares, the layout done
            dock = window.findChild(QDockWidget, "alertDock")
            assert dock is not None
            # The bottom dock a third of the window: every table row in sight, tiles full size.
            window.resizeDocks([dock], [window.height() // 3 + 60], Qt.Orientation.Vertical)
            screen = QApplication.primaryScreen().geometry()
            for theme in themes():
                looks.looks.set_choice(theme)
                window.tabs.setCurrentWidget(window.alerts.alerts_tab)
                window.grid.select(first, 1)
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
            for stub, workload_id in started:
                stub.CancelWorkload(pb.CancelWorkloadRequest(workload_id=workload_id),  # type: ignore[attr-defined]
                                    timeout=5)  # fmt: skip
            wait_until(app, lambda: all(w.state.ended for w in fleet.control.workloads()), 30)
            window.close()
            session.stop()
            for channel in channels:
                channel.close()


def shoot_compact(tag: str) -> None:
    """1,000 GPUs of synthetic samples (no daemons) in a maximised window: compact tiles."""
    from density_screenshots import feed, targets
    from shot_tools import settle, wait_until
    from theme_screenshots import save  # the same OUT, from the same arguments

    from console.app import qt_application
    from console.main_window import MainWindow
    from console.session import ConsoleSession
    from console.views.window.window_looks import WindowLooks

    app = qt_application()
    nodes = targets(125)
    session = ConsoleSession(nodes)
    session.connections.start()  # the network thread, connected to nothing
    window = MainWindow(session)
    looks = WindowLooks(window, f"views-compact-{tag}-{os.getpid()}", "dark")
    window.showMaximized()
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
        xvfb, wm, display = start_x(width, height)
        try:
            env = {**os.environ, "DISPLAY": display, "QT_QPA_PLATFORM": "xcb"}
            for extra in ([], ["--compact"]):
                subprocess.run([sys.executable, __file__, *passed, "--screen", tag, *extra],
                               env=env, check=True, timeout=400)  # fmt: skip
        finally:
            for process in (wm, xvfb):
                process.terminate()
                process.wait(timeout=10)
    return 0


def start_x(width: int, height: int) -> tuple[subprocess.Popen[str], subprocess.Popen[str], str]:
    from theme_screenshots import start_x as start

    return start(width, height)


if __name__ == "__main__":
    sys.exit(main())
