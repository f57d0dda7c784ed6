"""Reloading the running daemon's config (SIGHUP), and checking a config offline.

Both read the config as the start does (defaults, the file, the flags, which
still win) and check what the start would: a config the daemon would refuse to
start with is refused here too, with the reason (file and key) and the old one
kept. A reload that would lower the security posture (node_daemon.security_posture)
is refused too, unless the new file allows it; either way it is a WARNING and a
journal event. Never called from a signal handler: the main thread runs a reload
after the handler has woken it (node_daemon.commands.main).
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path

from gpufleet.v1 import node_pb2 as pb
from node_daemon.alerts.am_client import AmTransport
from node_daemon.config import ConfigError, DaemonConfig, alertmanager_settings
from node_daemon.listen import ListenAddressError, parse_listen_address
from node_daemon.reload import plan_reload
from node_daemon.security_posture import ALLOW_KEY, weakenings
from node_daemon.server import NodeDaemon
from node_daemon.server_tls import check_tls_files

log = logging.getLogger("gpufleet.daemon")

Load = Callable[[], DaemonConfig]
Check = Callable[[DaemonConfig], None]
# What reading and checking a config raises for a bad one; anything else is a bug.
REJECTED = (ConfigError, ListenAddressError, ValueError, OSError)
MAX_SUMMARY = 1000  # a journal event's summary: the phrases, not a file's worth


class WeakerSecurity(ConfigError):
    """A reload refused because it would lower the security posture; the message says how."""


def reload_daemon(
    daemon: NodeDaemon, load: Load, check: Check, source: str, config_file: Path | None = None
) -> bool:
    """Re-read the config and apply what changed; False (logged, old config kept) if rejected.

    Args:
        load: reads defaults, the config file and the flags of the start.
        check: what the start checks beyond the file (exposure): ConfigError if refused.
        source: the config file, for the log.
        config_file: the file itself, to say so when a refused one is empty.
    """
    log.info("SIGHUP: reloading the configuration from %s", source)
    try:
        new = load()
        lowered = weakenings(daemon.config, new)
        if lowered and not new.reload.allow_weaker_security:
            raise WeakerSecurity(_refusal(source, lowered, config_file))
        plan = plan_reload(daemon.config, new)
        check(plan.config)
        daemon.reconfigure(plan.config)
    except WeakerSecurity as exc:
        # A warning, not an error: the daemon did what it should. The journal keeps it for
        # whoever looks later (the console's events), as an attempt to open the node.
        daemon.reloads.record(False, time.time())
        log.warning("reload rejected, the configuration in force is kept: %s", exc)
        _journal(daemon, f"config reload refused, the configuration in force is kept: {exc}")
        return False
    except REJECTED as exc:
        daemon.reloads.record(False, time.time())
        log.error("reload rejected, the configuration in force is kept: %s", exc)
        return False
    except Exception:
        # A bug must not end the main thread, and with it the daemon. What can fail by design
        # is tried before anything is applied (NodeDaemon.reconfigure); a bug past that point
        # leaves the parts applied before it, which the message says.
        daemon.reloads.record(False, time.time())
        log.exception("reload failed (a bug): parts of it may be applied; restart to be sure")
        return False
    daemon.reloads.record(True, time.time())
    if lowered:
        said = f"{source} lowers the security posture, as its {ALLOW_KEY} allows: " + "; ".join(
            lowered
        )
        log.warning("reload: %s", said)
        _journal(daemon, f"config reload applied: {said}")
    if plan.needs_restart:
        log.warning(
            "reload: needs a restart: %s (the values in force are kept until then)",
            ", ".join(plan.needs_restart),
        )
    log.info("%s", plan.summary())
    return True


def _refusal(source: str, lowered: tuple[str, ...], config_file: Path | None) -> str:
    empty = ""
    try:
        if config_file is not None and not config_file.read_text(encoding="utf-8").strip():
            empty = (
                "; the file is empty (cut short, or still being written? write a new file "
                "and rename it over the old one)"
            )
    except OSError:
        pass  # the file was read a moment ago; the reason stands without the hint
    return (
        f"{source} would lower the security posture: {'; '.join(lowered)}{empty}. To apply it "
        f"on purpose, put {ALLOW_KEY} in the file"
    )


def _journal(daemon: NodeDaemon, summary: str) -> None:
    """One CONFIG_RELOAD event, or held in memory while the journal cannot be written."""
    event = pb.Event(
        time_unix_ms=int(time.time() * 1000),
        kind=pb.EVENT_KIND_CONFIG_RELOAD,
        summary=summary[:MAX_SUMMARY],
    )
    daemon.journal.record_or_hold([event], [])


def check_config(path: Path, load: Load, check: Check) -> int:
    """`gpufleet daemon --check-config FILE`: 0 and 'FILE: OK', or 2 and the reason.

    Reads what the daemon would read at start (the file, the JWKS and secret files it
    names, the TLS certificates) and checks what it would check, but binds, opens and
    starts nothing, and needs no state directory.
    """
    try:
        config = load()
        check(config)
        if config.auth.tls is not None:
            check_tls_files(config.auth.tls)
        AmTransport(alertmanager_settings(config))  # its CA and client certificate load
        if config.metrics_listen is not None:
            parse_listen_address(config.metrics_listen)
    except REJECTED as exc:
        reason = str(exc)
        print(reason if str(path) in reason else f"{path}: {reason}", file=sys.stderr)
        return 2
    print(f"{path}: OK")
    return 0
