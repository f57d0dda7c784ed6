"""GPU health end to end (#15): a real daemon whose simulated GPUs fault by scenario, real
consoles signed in as an operator and an admin, the tile menu, the prompts, and the node's
own answers and refusals."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from PySide6.QtWidgets import QDialogButtonBox

from console.connections.security import LinkSecurity
from console.fleet.control import WorkloadRow
from console.fleet.health import GpuCondition, HealthState
from console.fleet.model import NodeRecord
from console.fleet.placement import gpu_refusal
from console.fleet.updates import LinkState
from console.main_window import MainWindow
from console.qt import roles
from console.session import ConsoleSession
from gpufleet.policy import Role as DaemonRole
from gpufleet.states import WorkloadState
from node_daemon.auth.identity import User
from node_daemon.auth.settings import AuthSettings
from node_daemon.auth.tokens import new_token, token_hash
from node_daemon.backends.simulated.backend import SimulatedBackend
from node_daemon.backends.simulated.scenario import ScenarioEvent
from node_daemon.healing.settings import HealingSettings
from tests.conftest import DaemonFactory

TOKENS = {name: new_token() for name in ("otto", "ada")}
USERS = (
    User("otto", DaemonRole.OPERATOR, (), token_hash(TOKENS["otto"])),
    User("ada", DaemonRole.ADMIN, (), token_hash(TOKENS["ada"])),
)
# GPU 1: a row remap waits for a reset (needs reset); GPU 3: a remap failed (needs inspection).
SCENARIO = """
[[event]]
at = 0.2
gpu = 1
kind = "remap_pending"

[[event]]
at = 0.2
gpu = 3
kind = "remap_failure"
"""


@pytest.fixture
def target(start_daemon: DaemonFactory, tmp_path: Path) -> str:
    scenario = tmp_path / "faults.toml"
    scenario.write_text(SCENARIO, encoding="utf-8")
    daemon = start_daemon(gpus=4, hostname="node-h", scenario=scenario, auth=AuthSettings(USERS))
    return str(daemon.address)


@pytest.fixture
def open_console(qtbot, start_window) -> Callable[[str, str], MainWindow]:  # type: ignore[no-untyped-def]
    def open_(target: str, user: str) -> MainWindow:
        session = ConsoleSession([target], security=LinkSecurity(token=TOKENS[user]))
        window = start_window(session, size=(1400, 900))
        node = window.session.fleet.node(target)
        qtbot.waitUntil(lambda: judged(node, 1, HealthState.NEEDS_RESET), timeout=20_000)
        qtbot.waitUntil(lambda: judged(node, 3, HealthState.NEEDS_INSPECTION), timeout=20_000)
        assert node.state is LinkState.CONNECTED and node.identity is not None
        return window

    return open_


def condition(node: NodeRecord, gpu: int) -> GpuCondition | None:
    snap = node.latest.get(gpu)
    return snap.condition if snap is not None else None


def judged(node: NodeRecord, gpu: int, state: HealthState) -> bool:
    found = condition(node, gpu)
    return found is not None and found.state is state


def menu_action(window: MainWindow, target: str, gpu: int, text: str):  # type: ignore[no-untyped-def]
    found = [
        a for a in window.grid.context_menu(target, gpu).actions() if a.text().startswith(text)
    ]
    assert found, f"no {text!r} in GPU {gpu}'s menu"
    return found[0]


def event_sentences(window: MainWindow) -> list[str]:
    model = window.alerts.event_model
    return [model.data(model.index(row, 4)) for row in range(model.rowCount())]


def queued(target: str) -> WorkloadRow:
    return WorkloadRow(
        target=target, id="w-1", name="train", argv=("python", "train.py"), owner="otto",
        gpu_count=1, min_free_memory_bytes=0, auto_place=False, state=WorkloadState.QUEUED,
        gpu_indices=(), pid=None, pid_start_unix_ms=None, queued_unix_ms=0,
        started_unix_ms=None, ended_unix_ms=None, exit_code=None, detail="",
    )  # fmt: skip


def test_an_operator_sees_health_drains_and_returns_a_gpu(qtbot, open_console, target) -> None:  # type: ignore[no-untyped-def]
    window = open_console(target, "otto")
    fleet = window.session.fleet
    node = fleet.node(target)
    # The node's judgement, in the tooltip and the detail's Health section.
    tile = window.grid.tile_rect(target, 1)
    assert tile is not None
    tooltip = window.grid.tooltip_at(tile.center()) or ""
    assert "health: needs reset" in tooltip
    reset = condition(node, 1)
    assert reset is not None and reset.reasons[0].code == "row_remap_pending"
    assert reset.reasons[0].summary in tooltip
    window.grid.select(target, 1)
    health = window.detail.health.plain_text()
    assert "needs reset since" in health and "the node places no new work on it" in health
    assert "pending yes, waiting for a GPU reset" in health
    # Drops refuse the broken GPUs, naming why, as the node would.
    refused = gpu_refusal(queued(target), fleet, 3, 0)
    assert refused is not None and refused.startswith("GPU 3 needs inspection: ")
    # Mark repaired needs the admin role: offered, disabled, and says so.
    clear = menu_action(window, target, 1, "Mark repaired (clear health)…")
    assert not clear.isEnabled() and "needs the admin role" in clear.text()
    # Drain GPU 0 from its tile's menu: a reason first, then the node's answer on the tile.
    drain = menu_action(window, target, 0, "Drain from placement…")
    assert drain.isEnabled()
    drain.trigger()
    dialog = window.control.health_prompts.dialog
    assert dialog is not None
    dialog.reason.setText("fan noise")
    with qtbot.waitSignal(window.session.pump.commandFinished, timeout=10_000) as done:
        dialog.buttons.button(QDialogButtonBox.StandardButton.Ok).click()
    assert done.args[0].ok, done.args[0].message
    drained = condition(node, 0)
    assert drained is not None and drained.drained and drained.drained_by == "otto"
    item = window.session.items.gpu_index(target, 0)
    assert item.data(roles.CONDITION_ROLE).drained
    refused = gpu_refusal(queued(target), fleet, 0, 0)
    assert refused == "GPU 0 is drained by otto: fan noise"
    sentence = "GPU 0 drained from placement by otto: fan noise (no new work)"
    qtbot.waitUntil(lambda: sentence in event_sentences(window), timeout=10_000)
    # ... and return it.
    back = menu_action(window, target, 0, "Return to placement")
    with qtbot.waitSignal(window.session.pump.commandFinished, timeout=10_000) as done:
        back.trigger()
    assert done.args[0].ok, done.args[0].message
    qtbot.waitUntil(lambda: not getattr(condition(node, 0), "drained", True), timeout=10_000)
    returned = "GPU 0 returned to placement by otto: it takes new work again"
    qtbot.waitUntil(lambda: returned in event_sentences(window), timeout=10_000)


def test_the_nodes_refusal_is_shown_in_its_own_words(qtbot, open_console, target) -> None:  # type: ignore[no-untyped-def]
    window = open_console(target, "otto")
    # Past the console's own check (the menu would not offer it): the node still decides.
    with qtbot.waitSignal(window.session.pump.commandFinished, timeout=10_000) as done:
        window.session.health.clear(target, 1, "GPU reset")
    result = done.args[0]
    assert not result.ok and result.message.startswith("PERMISSION_DENIED: ")
    # The message line names the node, never its address.
    node = window.session.fleet.node(target).name
    assert window.statusBar().currentMessage() == (
        f"clear the health of GPU 1 of {node}: failed: {result.message}"
    )
    with qtbot.waitSignal(window.control.health_prompts.message) as said:
        window.control.health_prompts.ask_clear(target, 1)
    assert said.args[0].startswith("Cannot clear health: needs the admin role")


def test_an_admin_marks_a_gpu_repaired(qtbot, open_console, target) -> None:  # type: ignore[no-untyped-def]
    window = open_console(target, "ada")
    clear = menu_action(window, target, 1, "Mark repaired (clear health)…")
    assert clear.isEnabled() and clear.text() == "Mark repaired (clear health)…"
    clear.trigger()
    dialog = window.control.health_prompts.dialog
    assert dialog is not None and not dialog.ok.isEnabled()  # what was done, first
    dialog.reason.setText("GPU reset by hand")
    with qtbot.waitSignal(window.session.pump.commandFinished, timeout=10_000) as done:
        dialog.buttons.button(QDialogButtonBox.StandardButton.Ok).click()
    assert done.args[0].ok, done.args[0].message
    assert done.args[0].what == f"clear the health of GPU 1 of {target}"

    # The node judges afresh from its readings: the simulated remap still waits for a
    # reset, so the GPU still needs one, and the console says what the node answered.
    assert done.args[0].message == "GPU 1 needs reset, in placement"
    node = window.session.fleet.node(target).name
    assert window.statusBar().currentMessage() == (
        f"clear the health of GPU 1 of {node}: GPU 1 needs reset, in placement"
    )


# -- self-healing -------------------------------------------------------------------------


def test_self_healing_that_acted_pops_up_and_a_dry_run_does_not(  # type: ignore[no-untyped-def]
    qtbot, start_daemon: DaemonFactory, monkeypatch
) -> None:
    backends = {mode: SimulatedBackend(2, seed=3, step_s=0.1) for mode in ("dry-run", "on")}
    nodes = {
        mode: str(start_daemon(backend, gpus=2, hostname=f"node-{mode}",
                               healing=HealingSettings(mode=mode)).address)
        for mode, backend in backends.items()
    }  # fmt: skip
    window = MainWindow(ConsoleSession(list(nodes.values())))
    qtbot.addWidget(window)
    notices: list[tuple[str, str]] = []
    places: list[tuple[tuple[str, int | None], ...]] = []
    show_notice = window.alerts.toast.show_notice

    def record(title: str, body: str, topic: str, about: Sequence[tuple[str, int | None]] = ()
               ) -> None:  # fmt: skip
        notices.append((title, body))
        places.append(tuple(about))
        show_notice(title, body, topic, about)

    monkeypatch.setattr(window.alerts.toast, "show_notice", record)
    window.session.start()
    fleet = window.session.fleet
    try:
        qtbot.waitUntil(lambda: all(len(n.latest) == 2 for n in fleet), timeout=15_000)
        # The console sees events from its connection on: the faults come after it.
        for backend in backends.values():  # GPU 1's driver asks for a reset
            backend.inject(ScenarioEvent(0, 1, "recovery_action", 1))
        did = "Self-healing drained GPU 1 from placement: "
        would = "Self-healing would drain GPU 1 from placement (dry run): "

        def logged(start: str, node: str) -> bool:
            return any(e.summary.startswith(start) and e.target == nodes[node]
                       for e in fleet.alerts.events())  # fmt: skip

        qtbot.waitUntil(lambda: logged(did, "on") and logged(would, "dry-run"), timeout=30_000)
        assert [title for title, _body in notices] == ["Self-healing on node-on"]
        # The health change itself pops up as the node's alert, not as a second notice here;
        # the Events tab has it in the node's words.
        changed = [e.summary for e in fleet.alerts.events() if e.kind == "gpu_health_changed"]
        assert any(line.startswith("GPU 1 needs reset (was healthy)") for line in changed), changed
        assert notices[0][1].startswith(did)
        assert places[0] == ((nodes["on"], 1),)  # the popup keeps off the GPU it is about
        drained = condition(fleet.node(nodes["on"]), 1)
        assert drained is not None and drained.drained and drained.drained_by == "self-healing"
        # The detail says what the node's self-healing may do (GetHealth, on selecting).
        window.grid.select(nodes["dry-run"], 1)
        policy = "self-healing on this node: dry run (it only says what it would do): drain"
        qtbot.waitUntil(lambda: policy in window.detail.health.plain_text(), timeout=10_000)
        watched = condition(fleet.node(nodes["dry-run"]), 1)
        assert watched is not None and watched.state is HealthState.NEEDS_RESET
        assert not watched.drained
    finally:
        window.session.stop()
