"""`gpufleet` command line: `daemon` here; other packages add subcommands.

Subcommands outside the daemon (console, demo) register through the
`gpufleet.commands` entry-point group, so this module never imports Qt.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import logging
import os
import select
import signal
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from importlib.metadata import entry_points
from pathlib import Path
from types import FrameType
from typing import NoReturn

from gpufleet.subcommand import add_subcommand
from node_daemon import __version__
from node_daemon.backends.simulated import ScenarioError
from node_daemon.commands.auth import add_auth_commands
from node_daemon.commands.backend_choice import build_backend
from node_daemon.commands.config_reload import check_config, reload_daemon
from node_daemon.commands.usage import add_usage_command
from node_daemon.config import OPTIONS, ConfigError, DaemonConfig, load_config_file, validate
from node_daemon.journal.schema_version import StateFileTooNew
from node_daemon.listen import ListenAddressError, parse_listen_address
from node_daemon.server import NodeDaemon

log = logging.getLogger("gpufleet.daemon")

INSECURE_WARNING_EVERY_S = 60.0


DAEMON_PAGE = (
    "Sample this server's GPUs and serve them over gRPC (gpufleet.v1). "
    "Exit codes: 0 stopped by SIGTERM or SIGINT (systemctl stop); 2 refused at start: the "
    "configuration, the listen address, the backend or the state directory (the reason "
    "on stderr; the systemd unit does not restart it); with --check-config, 0 and "
    "'FILE: OK' or 2 and the reason; 1 it failed while running (the log says why; the "
    "unit restarts it)."
)


def add_daemon_command(subparsers: argparse._SubParsersAction) -> None:
    summary = "run the node daemon on a GPU server"
    arg = add_subcommand(subparsers, "daemon", run_daemon, summary, DAEMON_PAGE).add_argument
    arg("--backend", choices=["auto", "nvml", "simulated"], help=OPTIONS["backend"])
    arg("--gpus", type=int, help=OPTIONS["gpus"] + " (default 8)")
    arg("--seed", type=int, help=OPTIONS["seed"])
    arg("--model", choices=["h100", "a100", "l40s"], help=OPTIONS["model"])
    arg("--scenario", type=Path, metavar="FILE", help=OPTIONS["scenario"])
    arg("--demo", action="store_true", default=None, help=OPTIONS["demo"])
    arg("--sim-speed", type=float, metavar="FACTOR", help=OPTIONS["sim_speed"])
    arg("--listen", metavar="HOST:PORT", help=OPTIONS["listen"] + " (default 127.0.0.1:50051)")
    arg("--interval", type=float, dest="sample_interval_s", metavar="SECONDS",
        help=OPTIONS["sample_interval_s"] + " (default 1)")  # fmt: skip
    arg("--config", type=Path, metavar="FILE", help="daemon TOML config ([daemon] table); "
        "SIGHUP (systemctl reload) re-reads it")  # fmt: skip
    arg("--check-config", type=Path, metavar="FILE",
        help="check FILE (and the JWKS, secret and certificate files it names) as the "
        "daemon would read it, then exit: 0 and 'FILE: OK', or 2 and the reason")  # fmt: skip
    arg("--insecure", action="store_true", default=None, help=OPTIONS["insecure"])
    arg("--ready-file", type=Path, metavar="FILE", help=OPTIONS["ready_file"])
    arg("--hostname", help=OPTIONS["hostname"])
    arg("--state-dir", type=Path, metavar="DIR", help=OPTIONS["state_dir"])
    arg("--metrics-listen", metavar="HOST:PORT", help=OPTIONS["metrics_listen"])
    arg("--alertmanager", action="append", dest="alertmanager_urls", metavar="URL",
        help=OPTIONS["alertmanager_urls"] + "; repeat for more")  # fmt: skip
    arg("-v", "--verbose", action="store_true", help="log debug messages")


def daemon_config(args: argparse.Namespace) -> DaemonConfig:
    """Defaults, then the config file, then flags given on the command line."""
    config = DaemonConfig()
    if args.config is not None:
        config = load_config_file(args.config, config)
    flags = {k: v for k, v in vars(args).items() if k in DaemonConfig.__dataclass_fields__}
    if flags.get("alertmanager_urls"):
        flags["alertmanager_urls"] = tuple(flags["alertmanager_urls"])
    return validate(replace(config, **{k: v for k, v in flags.items() if v is not None}))


def run_daemon(args: argparse.Namespace) -> int:
    _setup_logging(args.verbose)
    if args.check_config is not None:
        return _check_config(args)
    try:
        config = daemon_config(args)
        address = parse_listen_address(config.listen)
        _check_exposure(config, address.is_loopback)
        daemon = NodeDaemon(config, build_backend(config), address)
    except (ConfigError, ListenAddressError, ScenarioError, ValueError, OSError,
            StateFileTooNew) as exc:  # fmt: skip
        # 2: the unit does not restart it (RestartPreventExitStatus), a restart cannot help.
        print(f"gpufleet daemon: {exc}", file=sys.stderr)
        return 2
    wakeup, hangup, stopping = _stop_on_signals(daemon)
    daemon.start()
    if config.insecure and not address.is_loopback and config.auth.tls is None:
        _start_insecure_nagger(daemon)

    def reload() -> None:
        source = str(args.config) if args.config is not None else "the command line (no --config)"
        check = functools.partial(_check_exposure, loopback=address.is_loopback)
        reload_daemon(daemon, lambda: daemon_config(args), check, source, args.config)

    _wait_for_stop(daemon, wakeup, hangup, stopping, reload)
    _exit_now(0)


def _check_config(args: argparse.Namespace) -> int:
    """--check-config FILE: the file in place of --config, with the other flags given."""
    args.config = args.check_config

    def check(config: DaemonConfig) -> None:
        _check_exposure(config, parse_listen_address(config.listen).is_loopback)

    return check_config(args.check_config, lambda: daemon_config(args), check)


def _wait_for_stop(
    daemon: NodeDaemon,
    wakeup: socket.socket,
    hangup: threading.Event,
    stopping: threading.Event,
    reload: Callable[[], None],
) -> None:
    """Sleep on the signal wakeup socket until a stop begins, then until it is done;
    reload the config when woken by SIGHUP.

    A process signal may be delivered to any thread. Python runs its handler
    only in the main thread, the next time that runs bytecode: a main thread
    asleep on a lock would sleep through a SIGTERM that another thread took.
    The wakeup socket is written by whichever thread takes the signal. The
    reload runs here, on the main thread, not in the handler: it reads files
    and takes locks that the interrupted code may hold. Hangups that arrive
    during a reload are one more reload after it, not one each. `stopping` is set
    by the stop signal's handler itself: the stop thread it starts may not yet
    have marked the daemon stopped when this loop looks again (a loaded
    machine), and another minute's sleep on the socket must not follow.
    """
    while not stopping.is_set() and not daemon.wait_stopped(0):
        select.select([wakeup], [], [], 60.0)
        with contextlib.suppress(BlockingIOError):
            wakeup.recv(4096)
        if hangup.is_set() and not daemon.wait_stopped(0):
            hangup.clear()
            reload()
    daemon.wait()


def _exit_now(code: int) -> NoReturn:
    """End the process at once, once the daemon has stopped (its stores closed, its
    server stopped), with the log flushed.

    Not through the interpreter's teardown: that destroys gRPC's objects (its pollers'
    epoll fds among them) while gRPC's own threads still run, and a poller that polls
    again under load finds its fd closed and aborts the process (epoll_wait: Bad file
    descriptor). The kernel ends every thread at once, before any fd goes.
    """
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _check_exposure(config: DaemonConfig, loopback: bool) -> None:
    """Beyond loopback only with TLS and users (tokens), unless told it is insecure."""
    secured = config.auth.tls is not None and config.auth.enabled
    if loopback or secured or config.insecure:
        return
    needs = (
        ("TLS ([tls] cert and key)", config.auth.tls is not None),
        ("tokens ([[auth.users]] or [auth] jwks_file)", config.auth.enabled),
    )
    missing = [what for what, ok in needs if not ok]
    raise ConfigError(
        f"refusing to listen on {config.listen} without {' and '.join(missing)}: anyone who "
        "can reach that address could read and control this node. Configure them (see "
        "docs/security.md), listen on 127.0.0.1, or pass --insecure to accept the risk."
    )


def _start_insecure_nagger(daemon: NodeDaemon) -> None:
    def nag() -> None:
        while True:
            log.warning("INSECURE: serving on %s without TLS or tokens", daemon.address)
            if daemon.wait_stopped(INSECURE_WARNING_EVERY_S):
                return

    threading.Thread(target=nag, name="gpufleet-insecure-warning", daemon=True).start()


def _stop_on_signals(
    daemon: NodeDaemon,
) -> tuple[socket.socket, threading.Event, threading.Event]:
    """Install the handlers: the returned socket wakes the main thread on any signal, the
    events say a SIGHUP asked for a reload and a SIGTERM or SIGINT for the stop."""
    wakeup, wakeup_writer = socket.socketpair()
    wakeup.setblocking(False)
    wakeup_writer.setblocking(False)
    signal.set_wakeup_fd(wakeup_writer.fileno(), warn_on_full_buffer=False)

    stopping = threading.Event()

    def handle(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s", signal.Signals(signum).name)
        stopping.set()
        # Stop off the signal handler: server.stop() waits for the grace period.
        threading.Thread(target=daemon.stop, name="gpufleet-shutdown").start()

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)

    hangup = threading.Event()

    def reload_on_hangup(_signum: int, _frame: FrameType | None) -> None:
        hangup.set()  # only that: the main thread, woken by the wakeup socket, reloads

    signal.signal(signal.SIGHUP, reload_on_hangup)
    _keep[wakeup_writer.fileno()] = wakeup_writer  # the fd must outlive this function
    return wakeup, hangup, stopping


_keep: dict[int, socket.socket] = {}


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpufleet", description="GPU Fleet Console")
    parser.add_argument("--version", action="version", version=f"gpufleet {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_daemon_command(subparsers)
    add_auth_commands(subparsers)
    add_usage_command(subparsers)
    for entry in entry_points(group="gpufleet.commands"):
        entry.load()(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
