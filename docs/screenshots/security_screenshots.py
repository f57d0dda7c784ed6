"""Render the screenshots of docs/console.md (usage and audit tabs) offscreen.

    .venv/bin/python docs/screenshots/security_screenshots.py [OUT_DIR]

Starts three simulated GPU servers in this process with tokens and roles,
imports two weeks of usage history into them (as `gpufleet usage import`
would), runs workloads for a few users, makes some changes from the console
and some refused ones, then grabs the Usage and the Audit tab. Writes
console-usage.png and console-audit.png.
"""

from __future__ import annotations

import datetime as dt
import random
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import grpc
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication
from shot_tools import wait_until

from console.app import qt_application
from console.connections.security import LinkSecurity
from console.fleet.control_requests import KillTarget
from console.fleet.updates import LinkState
from console.main_window import MainWindow
from console.session import ConsoleSession
from gpufleet.policy import Role
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.auth.identity import User
from node_daemon.auth.settings import AuthSettings
from node_daemon.auth.tokens import new_token, token_hash
from node_daemon.commands.backend_choice import simulated_backend
from node_daemon.config import DaemonConfig
from node_daemon.listen import parse_listen_address
from node_daemon.server import NodeDaemon
from node_daemon.usage.importer import import_file
from node_daemon.usage.store import USAGE_FILE, UsageStore

OUT = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent
PEOPLE = {"ada": (Role.ADMIN, ()), "otto": (Role.OPERATOR, ("ml",)),
          "alice": (Role.OPERATOR, ("ml",)), "bob": (Role.OPERATOR, ("vision",)),
          "carol": (Role.OPERATOR, ("vision",)), "vera": (Role.VIEWER, ())}  # fmt: skip
TOKENS = {name: new_token() for name in PEOPLE}
USERS = tuple(User(n, role, teams, token_hash(TOKENS[n])) for n, (role, teams) in PEOPLE.items())


def history(path: Path, seed: int) -> Path:
    """Two weeks of plausible usage (our CSV import format)."""
    rng, today = random.Random(seed), dt.date.today()
    lines = ["day,user,gpu_seconds,busy_gpu_seconds,memory_gib_seconds,energy_joules,"
             "reserved_seconds,reserved_idle_seconds"]  # fmt: skip
    for back in range(14, 0, -1):
        day = (today - dt.timedelta(days=back)).isoformat()
        for user, hours in (("alice", 20), ("bob", 12), ("carol", 6), ("otto", 9)):
            gpu_s = rng.uniform(0.4, 1.2) * hours * 3600
            reserved = rng.uniform(0, 8) * 3600 if user in ("bob", "carol") else 0.0
            lines.append(f"{day},{user},{gpu_s:.0f},{gpu_s * rng.uniform(0.5, 0.95):.0f},"
                         f"{gpu_s * 30:.0f},{gpu_s * 450:.0f},{reserved:.0f},"
                         f"{reserved * rng.uniform(0.2, 0.7):.0f}")  # fmt: skip
    path.write_text("\n".join(lines) + "\n")
    return path


def start_node(number: int, root: Path) -> NodeDaemon:
    state = root / f"node-{number}"
    state.mkdir()
    store = UsageStore(state / USAGE_FILE)
    import_file(store, history(root / f"history-{number}.csv", number), "csv")
    store.close()
    config = replace(
        DaemonConfig(), listen="127.0.0.1:0", backend="simulated", gpus=4, seed=number,
        sample_interval_s=0.5, process_interval_s=1.0, hostname=f"gpu-node-0{number}",
        state_dir=state, auth=AuthSettings(USERS),
        demo=True,  # as `gpufleet demo`'s nodes: workloads run as this account, owner's name kept
    )  # fmt: skip
    daemon = NodeDaemon(config, simulated_backend(config), parse_listen_address(config.listen))
    daemon.start()
    return daemon


Metadata = tuple[tuple[str, str], ...]


def as_user(
    target: str, user: str, call: Callable[[pb_grpc.NodeServiceStub, Metadata], object]
) -> None:
    with grpc.insecure_channel(target) as channel:
        try:
            call(pb_grpc.NodeServiceStub(channel), (("authorization", f"Bearer {TOKENS[user]}"),))
        except grpc.RpcError as exc:
            print(f"{user} on {target}: {exc.code().name}: {exc.details()}")  # type: ignore[attr-defined]


def busy_fleet(targets: list[str]) -> None:
    """Workloads for a few users, a team reservation, and refused attempts."""
    in_2h = int((time.time() + 7200) * 1000)
    for target, owner in zip(targets, ("alice", "bob", "otto"), strict=True):
        request = pb.SubmitWorkloadRequest(argv=["sleep", "600"], owner=owner, gpu_count=1,
                                           auto_place=True, name=f"{owner}-train")  # fmt: skip
        as_user(target, owner, lambda s, m, r=request: s.SubmitWorkload(r, timeout=5, metadata=m))
    reserve = pb.ReserveRequest(gpu_indices=[3], holder="team:vision", until_unix_ms=in_2h,
                                reason="ablation study")  # fmt: skip
    as_user(targets[1], "carol", lambda s, m: s.Reserve(reserve, timeout=5, metadata=m))
    kill = pb.KillProcessRequest(gpu_index=0, pid=4321, start_time_unix_ms=1)
    as_user(targets[0], "vera", lambda s, m: s.KillProcess(kill, timeout=5, metadata=m))
    for_vera = pb.ReserveRequest(gpu_indices=[2], holder="vera", until_unix_ms=in_2h)
    as_user(targets[2], "otto", lambda s, m: s.Reserve(for_vera, timeout=5, metadata=m))


def console_changes(app: QApplication, window: MainWindow) -> None:
    """The admin kills one of bob's processes from the console (it shows in the audit log)."""
    fleet, control = window.session.fleet, window.session.control

    def bobs() -> KillTarget | None:
        for node in fleet:
            for gpu, snap in node.latest.items():
                for p in snap.processes:
                    if p.user == "bob" and p.command == "sleep 600":
                        return KillTarget(node.target, node.name, gpu, p)
        return None

    wait_until(app, lambda: bobs() is not None)
    victim = bobs()
    assert victim is not None
    control.kill(victim, grace_s=2)
    wait_until(app, lambda: bobs() is None)


def main() -> int:
    app = qt_application(offscreen=True)
    root = Path(tempfile.mkdtemp(prefix="gpufleet-shots-"))
    daemons = [start_node(n, root) for n in (1, 2, 3)]
    targets = [str(d.address) for d in daemons]
    session = ConsoleSession(targets, security=LinkSecurity(token=TOKENS["ada"]), profile="prod")
    window = MainWindow(session)
    try:
        window.resize(1600, 1000)
        session.start()
        window.show()
        wait_until(app, lambda: all(n.state is LinkState.CONNECTED and n.identity for n in
                                    session.fleet))  # fmt: skip
        busy_fleet(targets)
        console_changes(app, window)
        time.sleep(3)  # let the meters bill the running workloads a few seconds
        dock = window.findChild(type(window.tabs.parent()), "alertDock")
        window.resizeDocks([dock], [560], Qt.Orientation.Vertical)
        window.grid.select(targets[0], 0)
        window.tabs.setCurrentWidget(window.reports.usage_panel)
        panel = window.reports.usage_panel
        panel.refresh.click()
        wait_until(
            app,
            lambda: not window.reports.usage_model.busy and window.reports.usage_model.rowCount(),
        )
        app.processEvents()
        save(window, "console-usage.png")
        window.tabs.setCurrentWidget(window.reports.audit_panel)
        window.reports.audit_panel.refresh.click()
        wait_until(
            app,
            lambda: not window.reports.audit_model.busy and window.reports.audit_model.rowCount(),
        )
        app.processEvents()
        save(window, "console-audit.png")
    finally:
        session.stop()
        window.close()
        for daemon in daemons:
            daemon.stop(grace_s=1.0)
    return 0


def save(window: MainWindow, name: str) -> None:
    path = OUT / name
    if not window.grab().save(str(path)):
        raise OSError(f"could not write {path}")
    print(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
