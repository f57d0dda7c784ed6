"""`gpufleet console`, `gpufleet demo` and the terminal commands. Qt is imported only when
console or demo run."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from gpufleet.subcommand import add_subcommand

if TYPE_CHECKING:
    from console.main_window import MainWindow


CONSOLE_PAGE = (
    "Watch node daemons. Nodes come from --node flags, else from the profile "
    "in the console settings file (default: ~/.config/gpufleet/console.toml), which also "
    "names the CA for TLS and a client certificate; the token comes from the system "
    "keyring (`gpufleet console login`), a token file, $GPUFLEET_TOKEN, or the profile's "
    "token_command (a program that prints one, e.g. an SSO helper; run again before the "
    "token expires). Exit codes: 0 the window was closed (or the screenshot saved); 1 the "
    "screenshot could not be written; 2 no display, no Qt, settings, a profile or a token "
    "that cannot be used, or no nodes to watch (the reason on stderr)."
)


LOGIN_PAGE = (
    "Read the token (from the terminal without echo, or from standard input) "
    "and keep it in the system keyring under service 'gpufleet' and the profile's name; "
    "without a keyring, in a token file only you can read. Never in the settings file. "
    "With --node, a profile that does not exist yet is added to the settings file. "
    "Exit codes: 0 stored (where, on stdout); 2 the settings, the profile, the token read "
    "or the keyring refused it (the reason on stderr)."
)


DEMO_PAGE = (
    "Start N simulated GPU servers (daemon processes on loopback, 8 GPUs "
    "each) and the console connected to them. Each starts with a day of history, demo "
    "users' running and queued workloads and reservations; gpu-node-02 plays an incident. "
    "The terminal commands reach them through the profile 'demo' (e.g. `gpufleet alerts "
    "--profile demo`); any owner works (alice, bob, root), as the demo's own account. "
    "Closing the window (or SIGTERM, ^C) stops the nodes and every workload they started, "
    "and removes the profile. Exit codes: 0 closed (the window, File, Quit, SIGTERM or "
    "^C) or the screenshot saved; 1 a simulated server did not start (its log on "
    "stderr), or the screenshot could not be written; 2 no display or no Qt."
)


# The commands console/terminal/commands.py registers (tests/console/test_terminal.py
# checks the two agree): named here too, for an install without the console extra.
TERMINAL_COMMANDS = ("status", "ps", "alerts", "ack", "silence", "silences", "unsilence",
                     "reserve", "release", "kill", "health", "drain", "undrain", "queue",
                     "move", "report")  # fmt: skip


def add_console_command(subparsers: argparse._SubParsersAction) -> None:
    summary = "open the desktop console"
    parser = add_subcommand(subparsers, "console", run_console_command, summary, CONSOLE_PAGE)
    parser.add_argument("--node", action="append", default=[], metavar="HOST:PORT",
                        help="a node daemon to watch; repeat for more")  # fmt: skip
    parser.add_argument("--config", type=Path, metavar="FILE", help="console settings TOML")
    parser.add_argument("--profile", metavar="NAME",
                        help="the fleet profile to open (default: `profile = ...` in the "
                        "settings)")  # fmt: skip
    parser.add_argument("--screenshot", type=Path, metavar="FILE",
                        help="render offscreen, save a PNG after a few seconds, exit")  # fmt: skip
    parser.add_argument("--wall", action="store_true",
                        help="wall-display mode: full screen, large type, no editing "
                        "(Ctrl+Shift+W leaves it)")  # fmt: skip
    parser.add_argument("--at", metavar="TIME",
                        help="open at a past moment (replay): ISO 8601 (local time unless "
                        "it names a zone), a time of today (03:12), or relative (-2h); "
                        "the replay strip's Share copies such a command")  # fmt: skip
    parser.add_argument("--gpu", metavar="NODE:INDEX",
                        help="open this GPU's detail (its node as the grid names it, or "
                        "HOST:PORT), e.g. gpu-node-02:3")  # fmt: skip
    commands = parser.add_subparsers(dest="console_command", metavar="login")
    add_login_command(commands)


def add_demo_command(subparsers: argparse._SubParsersAction) -> None:
    summary = "start simulated GPU servers and the console"
    parser = add_subcommand(subparsers, "demo", run_demo_command, summary, DEMO_PAGE)
    parser.add_argument("--nodes", type=int, default=4, help="simulated servers (default 4)")
    parser.add_argument("--gpus", type=int, default=8, help="GPUs per server (default 8)")
    parser.add_argument(
        "--screenshot", type=Path, metavar="FILE",
        help="render offscreen, save a PNG after a few seconds, exit",
    )  # fmt: skip


def add_terminal_commands(subparsers: argparse._SubParsersAction) -> None:
    """status, ps, alerts, ack, silence(s), unsilence, reserve, release, kill, health,
    drain, undrain, queue, submit, move: gRPC only, no Qt.

    They find nodes and credentials as the console does (its settings, keyring), so a
    daemon-only install (no console extra: no platformdirs, no keyring) lacks their
    dependencies. There they are still listed and say what to install, `submit` falls
    back to queueing on one node named HOST:PORT, and every other command of `gpufleet`
    keeps working.
    """
    try:
        from console.terminal.commands import add_terminal_commands as add
    except ImportError as exc:
        from gpufleet.client.submit_command import add_submit_command

        add_submit_command(subparsers)
        for name in TERMINAL_COMMANDS:
            # No option prefix: whatever follows (--node ...) is taken, not refused.
            parser = subparsers.add_parser(
                name, help="(needs the console extra)", add_help=False, prefix_chars="\x00"
            )
            parser.add_argument("ignored", nargs="*", help=argparse.SUPPRESS)
            parser.set_defaults(run=lambda _args, name=name, why=str(exc): _needs_extra(name, why))
        return
    add(subparsers)


def _needs_extra(command: str, why: str) -> int:
    print(f"gpufleet {command}: needs the console extra: pip install 'gpufleet[console]' "
          f"({why})", file=sys.stderr)  # fmt: skip
    return 2


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
    try:
        at_ms = _moment_or_none(args.at)
    except ValueError as exc:
        print(f"gpufleet console: --at: {exc}", file=sys.stderr)
        return 2
    if _needs_display(args.screenshot, "console") or not _import_qt_or_explain():
        return 2
    from console.app import SCREENSHOT_SETTLE_S, build_window, run_console
    from console.credentials import CredentialError, find_token, link_security
    from console.settings import SettingsError, load_settings

    try:
        profile = load_settings(args.config).profile(args.profile)
        token = find_token(profile)
        security = link_security(profile, token)
    except (SettingsError, CredentialError) as exc:
        print(f"gpufleet console: {exc}", file=sys.stderr)
        return 2
    nodes = args.node or list(profile.nodes)
    if not nodes:
        print("gpufleet console: no nodes to watch; pass --node HOST:PORT or list them in "
              "the settings file (nodes = [\"host:50051\"])", file=sys.stderr)  # fmt: skip
        return 2
    none = "none (no keyring entry, token file, $GPUFLEET_TOKEN or token_command)"
    source = token.source if token else none
    logging.getLogger("gpufleet.console").info(
        "profile %s: %d nodes, %s, token: %s", profile.name, len(nodes),
        "mutual TLS" if profile.client_cert else "TLS" if profile.tls else "plaintext", source,
    )  # fmt: skip
    logging.getLogger("gpufleet.console").info("popups: %s", profile.notify.describe())
    # The plots' ranges older than the nodes keep: the profile's Prometheus, if any.
    from console.connections.prometheus_range import source_of
    from console.slurm_token import slurm_token

    # The profile's Slurm (slurm_url): its token is fetched on the Slurm link's thread.
    slurm_keys = profile.slurm
    slurm = None if slurm_keys is None else (
        slurm_keys, lambda: slurm_token(profile.name, slurm_keys)
    )  # fmt: skip
    build = partial(build_window, nodes, people=profile.people, security=security,
                    profile=profile.name, notify=profile.notify, theme=profile.theme,
                    wall=args.wall, prometheus=source_of(profile), slurm=slurm)  # fmt: skip
    if at_ms is None and args.gpu is None:
        return run_console(build, screenshot=args.screenshot)
    from console.opening_moment import OpeningMoment

    opened_with = (["--profile", args.profile] if args.profile else []) + [
        word for node in args.node for word in ("--node", node)
    ]
    opening: list[OpeningMoment] = []

    def open_there(window: MainWindow) -> None:
        window.replay.opened_with = opened_with  # Share: as this console was opened
        opening.append(OpeningMoment(window, at_ms, args.gpu))

    # A moment's screenshot waits for its answers (settled), not for live plots to fill.
    settle_s = 1.0 if at_ms is not None else SCREENSHOT_SETTLE_S
    return run_console(build, screenshot=args.screenshot, on_ready=open_there,
                       settled=lambda: opening[0].settled, settle_s=settle_s)  # fmt: skip


def _moment_or_none(text: str | None) -> int | None:
    """--at as Unix ms (None: not given), read as the replay strip reads a typed moment.

    Raises:
        ValueError: not a moment, or one to come; the message names the forms.
    """
    if text is None:
        return None
    from console.fleet.timeline import parse_moment

    return parse_moment(text, int(time.time() * 1000))


def add_login_command(commands: argparse._SubParsersAction) -> None:
    summary = "store a profile's token in the system keyring"
    login = add_subcommand(commands, "login", run_login_command, summary, LOGIN_PAGE)
    login.add_argument("--profile", dest="login_profile", metavar="NAME",
                       help="the profile (default: the settings' default profile)")  # fmt: skip
    login.add_argument("--config", dest="login_config", type=Path, metavar="FILE",
                       help="console settings TOML")  # fmt: skip
    login.add_argument("--node", dest="login_nodes", action="append", default=[],
                       metavar="HOST:PORT", help="nodes of a new profile; repeat")  # fmt: skip
    login.add_argument("--ca", type=Path, metavar="FILE", help="a new profile's CA (TLS)")
    login.add_argument("--client-cert", type=Path, metavar="FILE", help="for mutual TLS")
    login.add_argument("--client-key", type=Path, metavar="FILE", help="for mutual TLS")


def run_login_command(args: argparse.Namespace) -> int:
    from console.login import LoginError, login

    try:
        lines = login(
            args.login_config or args.config, args.login_profile or args.profile,
            args.login_nodes, args.ca, args.client_cert, args.client_key,
        )  # fmt: skip
    except LoginError as exc:
        print(f"gpufleet console login: {exc}", file=sys.stderr)
        return 2
    for line in lines:
        print(line)
    return 0


def run_demo_command(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if _needs_display(args.screenshot, "demo") or not _import_qt_or_explain():
        return 2
    from console.app import build_window, run_console
    from console.connections.security import LinkSecurity
    from console.demo_fleet import DemoFleet, DemoFleetError
    from console.demo_seed import DEMO_PEOPLE

    # Until the window's loop watches signals (_on_demo_ready): a SIGTERM still ends the demo
    # through the `with`, never around it.
    signal.signal(signal.SIGTERM, _exit_on_signal)
    with DemoFleet(nodes=args.nodes, gpus=args.gpus) as fleet:
        try:
            targets = fleet.start()
        except DemoFleetError as exc:
            print(f"gpufleet demo: {exc}", file=sys.stderr)
            return 1
        print(fleet.first_message(), flush=True)
        build = partial(build_window, targets, DEMO_PEOPLE, LinkSecurity(token=fleet.token))
        return run_console(build, screenshot=args.screenshot, on_ready=_on_demo_ready)


def _exit_on_signal(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def _on_demo_ready(window: object) -> None:
    from console.quit_on_signals import quit_on_signals

    quit_on_signals()
    _select_first_gpu(window)


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
