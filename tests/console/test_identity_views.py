"""Who we are on each node, until when, and the node's kill policy, in the widgets (offscreen).

The fleet model fed as from the network (WhoAmI decoded from hand-built
pb.Caller messages), the real views; the window's expiry announcement.
"""

from __future__ import annotations

import dataclasses
import time

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu

from console.connections.decode import decode_caller
from console.fleet.identity import Identity
from console.fleet.process_row import ProcessRow
from console.fleet.updates import IdentityUpdate
from console.main_window import MainWindow
from console.qt.fleet_item_model import FleetItemModel, node_tooltip
from console.qt.inventory_model import InventoryTableModel
from console.session import ConsoleSession
from console.views.detail.gpu_detail import GpuDetailPanel
from gpufleet.v1 import node_pb2 as pb
from tests.console.test_control_model import GIB, NOW, A, fleet_with, report

HOUR_MS = 3_600_000
ISSUER = "https://sso.example.com"
JOB = ProcessRow(4242, "alice", "python train.py", 8 * GIB, NOW - 5000, None, "41000")
PLAIN = dataclasses.replace(JOB, pid=4343, slurm_job_id=None)


def alice(
    allow_jobs: bool = False, expires_ms: int | None = NOW + 6 * HOUR_MS + 60_000
) -> Identity:
    caller = pb.Caller(user="alice", role=pb.ROLE_OPERATOR, teams=["ml"], authenticated_by="jwt",
                       allow_kill_job_processes=allow_jobs, token_issuer=ISSUER)  # fmt: skip
    if expires_ms is not None:
        caller.credential_expires_unix_ms = expires_ms
    identity = decode_caller(A, caller).identity
    assert identity is not None
    return identity


def detail_of(qtbot, allow_jobs: bool) -> GpuDetailPanel:  # type: ignore[no-untyped-def]
    fleet = fleet_with(A)
    report(fleet, A, 2, processes=(JOB, PLAIN))
    fleet.apply(IdentityUpdate(A, alice(allow_jobs)))
    panel = GpuDetailPanel(fleet, clock=lambda: NOW)
    qtbot.addWidget(panel)
    panel.show_gpu(A, 2)
    return panel


def kill_action(panel: GpuDetailPanel, pid: int) -> QAction:
    row = next(
        r for r in range(panel.processes.rowCount()) if panel.processes.kill_target(r).pid == pid
    )  # type: ignore[union-attr]
    menu: QMenu = panel.process_menu(row)
    return menu.actions()[0]


def test_the_detail_panel_says_who_we_are_and_when_the_token_expires(qtbot) -> None:
    panel = detail_of(qtbot, allow_jobs=False)
    assert (
        "signed in as alice (operator; teams ml) by jwt from https://sso.example.com, "
        "expires in 6 h" in panel.facts.text()
    )


def test_the_node_tooltip_says_it_too(qtbot) -> None:
    fleet = fleet_with(A)
    # From the wall clock now, not the module's NOW (taken at collection, minutes ago
    # by now on a loaded machine's worker): the item model reads the wall clock.
    now = int(time.time() * 1000)
    fleet.apply(IdentityUpdate(A, alice(expires_ms=now + 45 * 60_000)))
    assert node_tooltip(fleet.node(A), now_ms=now).splitlines()[-2:] == [
        "signed in as alice (operator; teams ml) by jwt from https://sso.example.com, "
        "expires in 45 min",
        "Slurm job processes: refused (allow_kill_job_processes = false)",
    ]
    items = FleetItemModel(fleet)
    shown = items.node_index(A).data(Qt.ItemDataRole.ToolTipRole)
    assert "by jwt from https://sso.example.com, expires in 4" in shown  # the wall clock: 44-45 min


def test_the_inventory_has_a_column_for_the_expiry(qtbot) -> None:
    fleet = fleet_with(A, gpus=1)
    expires = int(time.time() * 1000) + 2 * HOUR_MS
    fleet.apply(IdentityUpdate(A, alice(expires_ms=expires)))
    model = InventoryTableModel(fleet)
    headers = [model.headerData(c, Qt.Orientation.Horizontal) for c in range(model.columnCount())]
    column = headers.index("Credential expires")
    assert model.index(0, column).data() == time.strftime(
        "%Y-%m-%d %H:%M", time.localtime(expires / 1000)
    )
    assert model.index(0, headers.index("Signed in as")).data() == (
        "alice (operator; teams ml) by jwt from https://sso.example.com"
    )


def test_a_job_process_is_refused_in_the_menu_where_the_node_refuses_job_kills(qtbot) -> None:
    panel = detail_of(qtbot, allow_jobs=False)
    job = kill_action(panel, JOB.pid)
    assert not job.isEnabled()
    assert job.text() == (
        "Kill pid 4242… (node-1 refuses to kill processes of Slurm jobs "
        "(allow_kill_job_processes = false))"
    )
    assert job.toolTip().endswith("pid 4242 belongs to Slurm job 41000; cancel it with scancel")
    assert kill_action(panel, PLAIN.pid).isEnabled()  # no job: the policy does not concern it
    assert not panel.kill_zone.isHidden()  # an operator: the zone is there, its verdicts exact
    assert not panel.kill_zone._judge(panel.processes.kill_target(0)).ok  # type: ignore[arg-type]


def test_a_job_process_may_be_killed_where_the_node_allows_it(qtbot) -> None:
    panel = detail_of(qtbot, allow_jobs=True)
    job = kill_action(panel, JOB.pid)
    assert job.isEnabled() and job.text() == "Kill pid 4242…"
    assert job.toolTip() == (
        "kill pid 4242 (alice: python train.py) on node-1 GPU 2 of Slurm job 41000"
    )


def test_a_token_about_to_expire_is_announced_in_a_toast_and_the_message_line(qtbot) -> None:
    session = ConsoleSession([A], profile="prod")  # not started: the model fed by hand
    window = MainWindow(session)
    qtbot.addWidget(window)
    window.show()
    fleet = session.fleet
    fleet.apply(IdentityUpdate(A, alice(expires_ms=int(time.time() * 1000) + 100_000)))
    notices = window.alerts.credential_reminder.check()
    assert [n.title for n in notices] == ["Token expires in 1 min"]
    assert (
        window.alerts.toast.isVisible()
        and window.alerts.toast.title.text() == "Token expires in 1 min"
    )
    body = window.alerts.toast.body.text()
    assert body.startswith("The token of profile prod (alice by jwt from https://sso.example.com)")
    # No inventory yet: the node is named by its address, and said to be so.
    assert body.endswith(
        "on 10.0.0.1:50051 (no answer yet); sign in again: gpufleet console login --profile prod."
    )
    assert window.statusBar().currentMessage() == body
    assert window.alerts.credential_reminder.check() == []  # once, not every second
    window.alerts.toast.noticeClicked.emit("credentials")
    assert window.tabs.currentWidget() is window.reports.inventory_panel
