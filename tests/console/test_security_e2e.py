"""The console against daemons with tokens, roles, TLS and mutual TLS; the audit and usage tabs.

Real daemons (start_daemon with AuthSettings and TlsSettings, certificates made
at test time by tests/certs.py), the real window offscreen, no sleeps.
"""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from PySide6.QtCore import Qt

from console.connections.channel import AUTH_BACKOFF_S, backoff_s
from console.connections.security import LinkSecurity
from console.credentials import find_token, link_security, store_token
from console.fleet.control_requests import KillTarget, WorkloadSpec
from console.fleet.identity import Identity
from console.fleet.model import NodeRecord
from console.fleet.placement import can_reserve
from console.fleet.updates import LinkState
from console.main_window import MainWindow
from console.session import ConsoleSession
from console.settings import load_settings
from gpufleet.policy import Role
from gpufleet.policy import Role as DaemonRole
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.auth.identity import User
from node_daemon.auth.settings import AuthSettings, TlsSettings
from node_daemon.auth.tokens import new_token, token_hash
from node_daemon.server import NodeDaemon
from tests.certs import Authority, write
from tests.conftest import DaemonFactory

# Workloads run as their owners' local accounts: the tests create them.
pytestmark = pytest.mark.usefixtures("workload_accounts")

TOKENS = {name: new_token() for name in ("vera", "otto", "ada")}
USERS = (
    User("vera", DaemonRole.VIEWER, (), token_hash(TOKENS["vera"])),
    User("otto", DaemonRole.OPERATOR, ("ml",), token_hash(TOKENS["otto"])),
    User("ada", DaemonRole.ADMIN, (), token_hash(TOKENS["ada"])),
)
SLEEPER = ("sleep", "300")


@dataclass(frozen=True)
class Pki:
    ca_path: Path
    server: tuple[Path, Path]
    ada: tuple[Path, Path]  # a client certificate naming ada


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    ca = Authority()
    (tmp_path / "ca.crt").write_bytes(ca.pem)
    server = write(tmp_path, "server", ca.issue("localhost", server=True))
    return Pki(tmp_path / "ca.crt", server, write(tmp_path, "ada", ca.issue("ada")))


@pytest.fixture
def open_console(start_window) -> Callable[..., MainWindow]:  # type: ignore[no-untyped-def]
    def open_(targets: list[str], security: LinkSecurity) -> MainWindow:
        session = ConsoleSession(targets, security=security, profile="test")
        return start_window(session, size=(1400, 900))

    return open_


def tls_daemon(start_daemon: DaemonFactory, pki: Pki, mutual: bool = False, **kw) -> NodeDaemon:  # type: ignore[no-untyped-def]
    cert, key = pki.server
    tls = TlsSettings(cert, key, pki.ca_path if mutual else None, require_client_cert=mutual)
    return start_daemon(gpus=2, auth=AuthSettings(USERS, tls), **kw)


def token_only(user: str) -> LinkSecurity:
    """A plaintext loopback link with a token: the metadata goes on every call by interceptor."""
    return LinkSecurity(token=TOKENS[user])


def connected(qtbot, window: MainWindow, target: str) -> NodeRecord:
    node = window.session.fleet.node(target)
    qtbot.waitUntil(
        lambda: node.state is LinkState.CONNECTED and node.identity is not None
        and node.samples_received >= 2,
        timeout=15_000,
    )  # fmt: skip
    return node


def audit_tab_visible(window: MainWindow) -> bool:
    return window.tabs.isTabVisible(window.tabs.indexOf(window.reports.audit_panel))


# -- connecting -----------------------------------------------------------------------


def test_profile_token_over_tls_shows_data_and_who_we_are(
    qtbot, open_console, start_daemon, pki: Pki, memory_keyring, tmp_path: Path
) -> None:
    daemon = tls_daemon(start_daemon, pki, hostname="secure-a")
    target = f"localhost:{daemon.port}"
    settings = tmp_path / "console.toml"
    settings.write_text(f'profile = "prod"\n[profiles.prod]\nnodes = ["{target}"]\n'
                        f'ca = "{pki.ca_path}"\n')  # fmt: skip
    profile = load_settings(settings).profile()
    store_token(profile, TOKENS["ada"])  # what `gpufleet console login` does
    security = link_security(profile, find_token(profile))  # what `gpufleet console` does
    window = open_console(list(profile.nodes), security)
    node = connected(qtbot, window, target)
    assert node.name == "secure-a" and node.gpu_count == 2
    assert node.identity == Identity("ada", Role.ADMIN, (), "token")
    tooltip = window.session.items.node_index(target).data(Qt.ItemDataRole.ToolTipRole)
    assert "signed in as ada (admin) by token" in tooltip
    tile = window.grid.tile_rect(target, 1)
    assert "signed in as ada (admin) by token" in window.grid.tooltip_at(tile.center())
    qtbot.waitUntil(lambda: window.reports.inventory_model.rowCount() == 2, timeout=5000)
    assert {r.signed_in_as for r in window.reports.inventory_model.rows()} == {
        "ada (admin) by token"
    }
    assert audit_tab_visible(window)
    assert window.reports.audit_panel.pages.currentWidget() is window.reports.audit_panel.log_page
    assert not window.detail.kill_zone.isHidden() or window.detail.key is None


def test_wrong_token_shows_unauthenticated_and_no_data(
    qtbot, open_console, start_daemon, pki: Pki
) -> None:
    daemon = tls_daemon(start_daemon, pki)
    target = f"localhost:{daemon.port}"
    ca = pki.ca_path.read_bytes()
    window = open_console([target], LinkSecurity(token="gft_" + "x" * 43, root_ca=ca))
    node = window.session.fleet.node(target)
    qtbot.waitUntil(lambda: node.state is LinkState.DENIED, timeout=15_000)
    assert node.state_detail.startswith("UNAUTHENTICATED: unknown token")
    assert node.info is None and node.samples_received == 0 and node.identity is None
    assert window.reports.inventory_model.rowCount() == 0
    tooltip = window.session.items.node_index(target).data(Qt.ItemDataRole.ToolTipRole)
    assert "denied: UNAUTHENTICATED: unknown token" in tooltip
    assert not audit_tab_visible(window)
    # A refused node is retried, but slowly: a token does not become valid in seconds.
    assert backoff_s(8, cap_s=AUTH_BACKOFF_S) >= 0.8 * AUTH_BACKOFF_S


def test_mutual_tls_identifies_by_client_certificate(
    qtbot, open_console, start_daemon, pki: Pki
) -> None:
    daemon = tls_daemon(start_daemon, pki, mutual=True)
    target = f"localhost:{daemon.port}"
    cert, key = pki.ada
    security = LinkSecurity(None, pki.ca_path.read_bytes(), key.read_bytes(), cert.read_bytes())
    window = open_console([target], security)
    node = connected(qtbot, window, target)
    assert node.identity == Identity("ada", Role.ADMIN, (), "client-certificate")


# -- roles in the UI ------------------------------------------------------------------


def submit(target: str, owner: str, gpus: int = 1) -> str:
    """Queue and auto-place a sleeper as admin ada, straight to the daemon."""
    request = pb.SubmitWorkloadRequest(argv=list(SLEEPER), owner=owner, gpu_count=gpus,
                                       auto_place=True, name=f"{owner}-job")  # fmt: skip
    with grpc.insecure_channel(target) as channel:
        stub = pb_grpc.NodeServiceStub(channel)
        metadata = (("authorization", f"Bearer {TOKENS['ada']}"),)
        return str(stub.SubmitWorkload(request, timeout=5, metadata=metadata).id)


def sleeper_gpu(node: NodeRecord, user: str) -> tuple[int, object] | None:
    for gpu, snap in node.latest.items():
        for process in snap.processes:
            if process.user == user and process.command == " ".join(SLEEPER):
                return gpu, process
    return None


def test_a_viewer_sees_no_audit_tab_and_no_actions(qtbot, open_console, start_daemon) -> None:
    daemon = start_daemon(gpus=2, hostname="node-v", auth=AuthSettings(USERS))
    target = str(daemon.address)
    submit(target, "otto")
    window = open_console([target], token_only("vera"))
    node = connected(qtbot, window, target)
    assert node.identity == Identity("vera", Role.VIEWER, (), "token")
    assert not audit_tab_visible(window)
    assert window.reports.audit_panel.pages.currentWidget() is window.reports.audit_panel.locked
    needs = "needs the operator role (vera is viewer on node-v)"
    assert not window.control.workload_panel.submit.isEnabled()
    assert needs in window.control.workload_panel.submit.toolTip()
    assert not window.alerts.alert_panel.acknowledge.isEnabled()
    qtbot.waitUntil(lambda: sleeper_gpu(node, "otto") is not None, timeout=10_000)
    gpu, _process = sleeper_gpu(node, "otto")
    window.grid.select(target, gpu)
    assert window.detail.kill_zone.isHidden()
    (kill,) = window.detail.process_menu(0).actions()
    assert not kill.isEnabled() and kill.text().endswith(f"({needs})")
    menu_texts = [
        (a.text(), a.isEnabled())
        for a in window.grid.context_menu(target, gpu).actions()
        if not a.isSeparator()  # between the workload's entries and the GPU's health ones
    ]
    assert menu_texts and all(needs in text and not on for text, on in menu_texts)
    verdict = can_reserve("vera", window.session.fleet, target, gpu, int(time.time() * 1000))
    assert not verdict.ok and verdict.reason == needs


def test_an_operator_may_act_only_for_itself_and_its_teams(
    qtbot, open_console, start_daemon
) -> None:
    daemon = start_daemon(gpus=2, hostname="node-o", auth=AuthSettings(USERS))
    target = str(daemon.address)
    window = open_console([target], token_only("otto"))
    connected(qtbot, window, target)
    fleet, now = window.session.fleet, int(time.time() * 1000)
    assert can_reserve("team:ml", fleet, target, 0, now).ok
    refused = can_reserve("vera", fleet, target, 0, now)
    assert refused.reason == (
        "needs the admin role for a reservation for vera (otto may act only for otto or team:ml)"
    )
    assert window.control.workload_panel.submit.isEnabled() and not audit_tab_visible(window)


# -- the audit tab --------------------------------------------------------------------


def refresh(qtbot, panel, model) -> str:  # type: ignore[no-untyped-def]
    with qtbot.waitSignal(model.refreshed, timeout=10_000) as done:
        panel.refresh.click()
    return str(done.args[0])


def test_audit_tab_lists_what_the_console_did_with_the_right_user(
    qtbot, open_console, start_daemon, pki: Pki, tmp_path: Path
) -> None:
    daemon = tls_daemon(start_daemon, pki, mutual=True, hostname="audited")
    target = f"localhost:{daemon.port}"
    cert, key = pki.ada
    security = LinkSecurity(None, pki.ca_path.read_bytes(), key.read_bytes(), cert.read_bytes())
    window = open_console([target], security)
    node = connected(qtbot, window, target)
    qtbot.waitUntil(lambda: audit_tab_visible(window), timeout=5000)
    session, pump = window.session, window.session.pump
    spec = WorkloadSpec("sleeper", SLEEPER, owner="ada", auto_place=True)
    with qtbot.waitSignal(pump.commandFinished, timeout=10_000) as submitted:
        session.control.submit(target, spec)
    assert submitted.args[0].ok, submitted.args[0].message
    qtbot.waitUntil(lambda: sleeper_gpu(node, "ada") is not None, timeout=10_000)
    gpu, process = sleeper_gpu(node, "ada")
    with qtbot.waitSignal(pump.commandFinished, timeout=20_000) as killed:
        session.control.kill(KillTarget(target, node.name, gpu, process), grace_s=2)
    assert killed.args[0].ok, killed.args[0].message

    panel, model = window.reports.audit_panel, window.reports.audit_model
    panel.user.setText("ada")
    said = refresh(qtbot, panel, model)
    assert said.startswith(f"{model.rowCount()} records from 1 node")
    done = {(r.user, r.method, r.result) for r in model.rows()}
    assert {("ada", "SubmitWorkload", "OK"), ("ada", "KillProcess", "OK")} <= done
    kill = next(r for r in model.rows() if r.method == "KillProcess" and r.result == "OK")
    assert f"pid={process.pid}" in kill.aimed_at and kill.peer.startswith("ipv4:127.0.0.1")
    shown = [model.index(0, c).data() for c in range(model.columnCount())]
    assert shown[1] == "audited" and shown[2] == "ada"

    panel.action.setCurrentText("Kill")
    refresh(qtbot, panel, model)
    assert model.rowCount() >= 2 and {r.method for r in model.rows()} == {"KillProcess"}
    panel.user.setText("nobody")
    assert refresh(qtbot, panel, model).startswith("0 records")
    panel.user.setText("")
    refresh(qtbot, panel, model)
    out = tmp_path / "audit.csv"
    panel.choose_path = lambda: str(out)
    with qtbot.waitSignal(panel.message) as message:
        panel.export.click()
    assert message.args[0] == f"Exported {model.rowCount()} audit records to {out}"
    lines = list(csv.DictReader(io.StringIO(out.read_text())))
    assert lines and all(line["method"] == "KillProcess" for line in lines)
    assert lines[0]["node"] == "audited" and lines[0]["user"] == "ada"
    assert lines[0]["time_utc"].endswith("Z") and len(lines[0]["hash"]) == 64


# -- the usage tab --------------------------------------------------------------------


def billed(target: str, user: str) -> float:
    """GPU-seconds the node has billed to `user` so far (asked as admin ada)."""
    with grpc.insecure_channel(target) as channel:
        reply = pb_grpc.NodeServiceStub(channel).QueryUsage(
            pb.QueryUsageRequest(), timeout=5,
            metadata=(("authorization", f"Bearer {TOKENS['ada']}"),),
        )  # fmt: skip
    return sum(r.gpu_seconds for r in reply.rows if r.key == user)


def test_usage_tab_sums_gpu_hours_of_every_node(
    qtbot, open_console, start_daemon, tmp_path: Path
) -> None:
    nodes = [start_daemon(gpus=2, hostname=f"use-{i}", auth=AuthSettings(USERS)) for i in (1, 2)]
    targets = [str(n.address) for n in nodes]
    for target in targets:
        submit(target, "otto")
    for target in targets:
        qtbot.waitUntil(lambda t=target: billed(t, "otto") > 0.3, timeout=15_000)
    before = sum(billed(t, "otto") for t in targets)
    window = open_console(targets, token_only("vera"))  # usage needs only the viewer role
    for target in targets:
        connected(qtbot, window, target)
    panel, model = window.reports.usage_panel, window.reports.usage_model
    said = refresh(qtbot, panel, model)
    (otto,) = [r for r in model.rows() if r.key == "otto"]
    assert otto.gpu_seconds >= before and otto.busy_gpu_seconds > 0
    assert model.kpis is not None and len(model.kpis.nodes) == 2
    assert model.kpis.gpu_seconds_total > 0 and "GPU-h observed" in said
    assert "worst node" in said and "use-1" in panel.kpis.toolTip()
    users = dict(panel.charts.shown["users"])
    assert users["otto"] == pytest.approx(otto.gpu_seconds / 3600)
    assert dict(panel.charts.shown["team"])["team:ml"] > 0

    panel.grouping.setCurrentText("node")
    refresh(qtbot, panel, model)
    assert {r.key for r in model.rows()} == {"use-1", "use-2"}
    assert model.headerData(0, Qt.Orientation.Horizontal, Qt.ItemDataRole.DisplayRole) == "node"
    out = tmp_path / "usage.csv"
    panel.choose_path = lambda: str(out)
    panel.export.click()
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert {r["node"] for r in rows} == {"use-1", "use-2"}
    assert all(float(r["gpu_seconds"]) > 0 for r in rows)
