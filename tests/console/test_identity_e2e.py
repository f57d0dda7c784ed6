"""WhoAmI's policy and expiry, end to end: real daemons with JWTs, the real window offscreen.

Two nodes that differ only in allow_kill_job_processes give the console
different verdicts on a Slurm job's process; a short-lived JWT from a
token_command is refreshed before it expires, on the open link.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from console.connections import node_link
from console.connections.security import LinkSecurity
from console.credentials import find_token, link_security
from console.fleet.control_requests import KillTarget
from console.fleet.model import NodeRecord
from console.fleet.placement import can_kill
from console.fleet.updates import LinkState
from console.main_window import MainWindow
from console.session import ConsoleSession
from console.settings import load_settings
from node_daemon.config import load_config_file
from node_daemon.server import NodeDaemon
from tests.conftest import DaemonFactory
from tests.node_daemon.jwt_mint import Issuer, claims

ISSUER_URL = "https://sso.example.com"


@pytest.fixture
def issuer() -> Issuer:
    return Issuer()


@pytest.fixture
def open_console(start_window) -> Callable[[list[str], LinkSecurity], MainWindow]:  # type: ignore[no-untyped-def]
    def open_(targets: list[str], security: LinkSecurity) -> MainWindow:
        session = ConsoleSession(targets, security=security, profile="prod")
        return start_window(session, show=False)

    return open_


def jwt_daemon(start_daemon: DaemonFactory, tmp_path: Path, issuer: Issuer, leeway_s: int = 30,
               **kw) -> NodeDaemon:  # type: ignore[no-untyped-def]  # fmt: skip
    jwks = issuer.write_jwks(tmp_path / "jwks.json")
    config = tmp_path / "daemon.toml"
    config.write_text(f'[auth]\njwks_file = "{jwks}"\nissuer = "{ISSUER_URL}"\n'
                      f"leeway_s = {leeway_s}\n", encoding="utf-8")  # fmt: skip
    return start_daemon(gpus=4, seed=0, auth=load_config_file(config).auth, **kw)


def token(issuer: Issuer, lifetime_s: int, user: str = "alice", role: str = "admin") -> str:
    body = claims(user, role, ("ml",), iss=ISSUER_URL, jti=f"j-{time.monotonic_ns()}")
    return issuer.mint({**body, "exp": int(time.time()) + lifetime_s})


def connected(qtbot, window: MainWindow, target: str) -> NodeRecord:  # type: ignore[no-untyped-def]
    node = window.session.fleet.node(target)
    qtbot.waitUntil(
        lambda: node.state is LinkState.CONNECTED and node.identity is not None
        and any(p.slurm_job_id for s in node.latest.values() for p in s.processes),
        timeout=15_000,
    )  # fmt: skip
    return node


def job_process(node: NodeRecord) -> KillTarget:
    gpu, process = next((g, p) for g, s in sorted(node.latest.items()) for p in s.processes
                        if p.slurm_job_id)  # fmt: skip
    return KillTarget(node.target, node.name, gpu, process)


def test_the_nodes_kill_policy_decides_the_verdict_on_a_slurm_job_process(
    qtbot, open_console, start_daemon, tmp_path: Path, issuer: Issuer
) -> None:
    refusing = jwt_daemon(start_daemon, tmp_path, issuer, hostname="gpu-node-03")
    allowing = jwt_daemon(start_daemon, tmp_path, issuer, hostname="gpu-node-04",
                          allow_kill_job_processes=True)  # fmt: skip
    targets = [f"127.0.0.1:{d.port}" for d in (refusing, allowing)]
    jwt = token(issuer, 6 * 3600 + 60)
    window = open_console(targets, LinkSecurity(token=jwt))
    no, yes = (connected(qtbot, window, t) for t in targets)
    assert no.identity is not None and yes.identity is not None
    assert (no.identity.allow_kill_job_processes, yes.identity.allow_kill_job_processes) == (
        False,
        True,
    )
    victim = job_process(no)
    verdict = can_kill(victim, window.session.fleet)
    job = victim.process.slurm_job_id
    assert not verdict.ok and verdict.reason == (
        "gpu-node-03 refuses to kill processes of Slurm jobs (allow_kill_job_processes = false): "
        f"pid {victim.pid} belongs to Slurm job {job}; cancel it with scancel"
    )
    allowed = job_process(yes)
    assert can_kill(allowed, window.session.fleet).ok
    # Who we are, how, from where, until when: the tooltip and the detail panel.
    tooltip = window.session.items.node_index(targets[0]).data(Qt.ItemDataRole.ToolTipRole)
    assert (
        "signed in as alice (admin; teams ml) by jwt from https://sso.example.com, expires in 6 h"
        in tooltip
    )
    window.detail.show_gpu(victim.target, victim.gpu)
    assert "by jwt from https://sso.example.com, expires in 6 h" in window.detail.facts.text()
    row = next(r for r in range(window.detail.processes.rowCount())
               if window.detail.processes.kill_target(r).pid == victim.pid)  # type: ignore[union-attr]  # fmt: skip
    action = window.detail.process_menu(row).actions()[0]
    assert (
        not action.isEnabled()
        and "gpu-node-03 refuses to kill processes of Slurm jobs" in action.text()
    )


def test_a_short_lived_jwt_is_refreshed_before_it_expires_on_the_open_link(
    qtbot, open_console, start_daemon, tmp_path: Path, issuer: Issuer
) -> None:
    daemon = jwt_daemon(start_daemon, tmp_path, issuer, hostname="gpu-node-05")
    target = f"127.0.0.1:{daemon.port}"
    # The SSO helper: a 20-second token at first, an hour-long one after.
    first, later = token(issuer, 20), token(issuer, 3600)
    calls = tmp_path / "calls"
    calls.write_text("0")
    helper = tmp_path / "sso-helper"
    helper.write_text(f"#!{sys.executable}\nn = int(open({str(calls)!r}).read())\n"
                      f"open({str(calls)!r}, 'w').write(str(n + 1))\n"
                      f"print({first!r} if n == 0 else {later!r})\n")  # fmt: skip
    helper.chmod(0o700)
    settings = tmp_path / "console.toml"
    settings.write_text(f'[profiles.prod]\nnodes = ["{target}"]\ntoken_command = "{helper}"\n')
    profile = load_settings(settings).profile("prod")
    window = open_console([target], link_security(profile, find_token(profile)))
    node = window.session.fleet.node(target)
    qtbot.waitUntil(lambda: node.identity is not None, timeout=15_000)
    assert node.identity is not None and node.identity.expires_unix_ms is not None
    assert node.identity.expires_unix_ms - time.time() * 1000 < 21_000
    received = node.samples_received
    # Refreshed half-way through its life (10 s left), well before it expires.
    qtbot.waitUntil(
        lambda: node.identity is not None and node.identity.expires_unix_ms is not None
        and node.identity.expires_unix_ms - time.time() * 1000 > 3000_000,
        timeout=20_000,
    )  # fmt: skip
    assert calls.read_text() == "2" and node.state is LinkState.CONNECTED
    assert node.samples_received > received  # the streams kept flowing


def test_a_node_shows_denied_in_its_own_words_as_soon_as_the_token_expires(
    qtbot, open_console, start_daemon, tmp_path: Path, issuer: Issuer
) -> None:
    daemon = jwt_daemon(start_daemon, tmp_path, issuer, leeway_s=0, hostname="gpu-node-06")
    target = f"127.0.0.1:{daemon.port}"
    window = open_console([target], LinkSecurity(token=token(issuer, 4)))
    node = window.session.fleet.node(target)
    qtbot.waitUntil(lambda: node.state is LinkState.CONNECTED, timeout=15_000)
    # Not at the next unary call (the inventory, every 30 s): the link asks at expiry.
    qtbot.waitUntil(lambda: node.state is LinkState.DENIED, timeout=10_000)
    assert node.state_detail.startswith("UNAUTHENTICATED: JWT expired at")
    assert node.identity is None
    tooltip = window.session.items.node_index(target).data(Qt.ItemDataRole.ToolTipRole)
    assert "denied: UNAUTHENTICATED: JWT expired at" in tooltip


def test_a_reloaded_kill_policy_reaches_the_verdict_without_a_reconnect(
    qtbot, open_console, start_daemon, tmp_path: Path, issuer: Issuer, monkeypatch
) -> None:
    monkeypatch.setattr(node_link, "INVENTORY_POLL_S", 0.5)  # WhoAmI comes with each poll
    daemon = jwt_daemon(start_daemon, tmp_path, issuer, hostname="gpu-node-07")
    target = f"127.0.0.1:{daemon.port}"
    window = open_console([target], LinkSecurity(token=token(issuer, 3600)))
    node = connected(qtbot, window, target)
    victim = job_process(node)
    assert not can_kill(victim, window.session.fleet).ok
    received = node.samples_received
    daemon.reconfigure(
        dataclasses.replace(daemon.config, allow_kill_job_processes=True)
    )  # SIGHUP's work
    qtbot.waitUntil(lambda: node.identity is not None and node.identity.allow_kill_job_processes,
                    timeout=10_000)  # fmt: skip
    assert can_kill(job_process(node), window.session.fleet).ok
    assert node.state is LinkState.CONNECTED and node.samples_received > received
