"""`gpufleet console` and `gpufleet demo`. Qt is imported only when they run."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path


def add_console_command(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "console",
        help="open the desktop console",
        description="Watch node daemons. Nodes come from --node flags, else from the "
        "console settings file (default: ~/.config/gpufleet/console.toml, `nodes = [...]`).",
    )
    parser.add_argument("--node", action="append", default=[], metavar="HOST:PORT",
                        help="a node daemon to watch; repeat for more")  # fmt: skip
    parser.add_argument("--config", type=Path, metavar="FILE", help="console settings TOML")
    parser.add_argument("--screenshot", type=Path, metavar="FILE",
                        help="render offscreen, save a PNG after a few seconds, exit")  # fmt: skip
    parser.set_defaults(run=run_console_command)


def add_demo_command(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="start simulated GPU servers and the console",
        description="Start N simulated GPU servers (daemon processes on loopback, 8 GPUs "
        "each) and the console connected to them. Closing the window stops them.",
    )
    parser.add_argument("--nodes", type=int, default=4, help="simulated servers (default 4)")
    parser.add_argument("--gpus", type=int, default=8, help="GPUs per server (default 8)")
    parser.add_argument(
        "--screenshot", type=Path, metavar="FILE",
        help="render offscreen, save a PNG after a few seconds, exit 0",
    )  # fmt: skip
    parser.set_defaults(run=run_demo_command)


def _needs_display(screenshot: Path | None, command: str) -> bool:
    from console.app import has_display

    if screenshot is not None or has_display():
        return False
    print(
        f"gpufleet {command}: no display found (DISPLAY and WAYLAND_DISPLAY are unset), so "
        "no window can open.\nRun it on a desktop session, or render offscreen instead:\n"
        f"  gpufleet {command} --screenshot out.png",
        file=sys.stderr,
    )
    return True


def _import_qt_or_explain() -> bool:
    try:
        import pyqtgraph  # noqa: F401
        import PySide6.QtWidgets  # noqa: F401
    except ImportError as exc:
        print(f"gpufleet: the console needs its extra: pip install 'gpufleet[console]' ({exc})",
              file=sys.stderr)  # fmt: skip
        return False
    return True


def run_console_command(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if _needs_display(args.screenshot, "console") or not _import_qt_or_explain():
        return 2
    from console.app import run_console
    from console.settings import SettingsError, load_settings

    try:
        settings = load_settings(args.config)
    except SettingsError as exc:
        print(f"gpufleet console: {exc}", file=sys.stderr)
        return 2
    nodes = args.node or list(settings.nodes)
    if not nodes:
        print("gpufleet console: no nodes to watch; pass --node HOST:PORT or list them in "
              "the settings file (nodes = [\"host:50051\"])", file=sys.stderr)  # fmt: skip
        return 2
    return run_console(nodes, screenshot=args.screenshot, people=settings.people)


def run_demo_command(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if _needs_display(args.screenshot, "demo") or not _import_qt_or_explain():
        return 2
    from console.app import run_console
    from console.demo_fleet import DemoFleet, DemoFleetError

    with DemoFleet(nodes=args.nodes, gpus=args.gpus) as fleet:
        try:
            targets = fleet.start()
        except DemoFleetError as exc:
            print(f"gpufleet demo: {exc}", file=sys.stderr)
            return 1
        return run_console(targets, screenshot=args.screenshot, on_ready=_select_first_gpu)


def _select_first_gpu(window: object) -> None:
    """Show a GPU's plots from the start, so the demo is not an empty panel."""
    from PySide6.QtCore import QTimer

    def select() -> None:
        targets = window.session.fleet.nodes()  # type: ignore[attr-defined]
        if len(targets) > 1 and targets[1].info:
            window.grid.select(targets[1].target, 2)  # type: ignore[attr-defined]
        else:
            QTimer.singleShot(200, select)

    QTimer.singleShot(200, select)
