"""An alert row's menu against a real daemon: copy its summary (node names, never
addresses), open its GPU, acknowledge it; what the role refuses is disabled, saying why."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QApplication, QMenu

from console.qt.alert_model import ALERT_ROLE
from console.views.alerts.alert_menu import alert_row_menu
from node_daemon.backends.simulated import SimulatedBackend
from node_daemon.backends.simulated.scenario import Scenario, ScenarioEvent

pytestmark = pytest.mark.qt_log_ignore(
    "This plugin does not support (grabbing the keyboard|raise)", extend=True
)


def entry(menu: QMenu, text: str):  # type: ignore[no-untyped-def]
    (action,) = [a for a in menu.actions() if a.text().replace("&", "").startswith(text)]
    return action


def test_an_alert_rows_menu(qtbot, open_console) -> None:  # type: ignore[no-untyped-def]
    lost = Scenario((ScenarioEvent(0.2, 1, "lost"),))
    console = open_console(gpus=2, backend=SimulatedBackend(gpu_count=2, scenario=lost, step_s=0.1))
    window, panel = console.window, console.window.alerts.alert_panel
    qtbot.waitUntil(
        lambda: any(panel.proxy.index(r, 0).data() is not None
                    and "gpu_lost" in str(panel.proxy.index(r, 3).data())
                    for r in range(panel.proxy.rowCount())),
        timeout=20_000,
    )  # fmt: skip
    row = next(
        panel.proxy.index(r, 0)
        for r in range(panel.proxy.rowCount())
        if "gpu_lost" in str(panel.proxy.index(r, 3).data())
    )
    menu = panel.row_menu(row)
    copy = entry(menu, "Copy summary")
    copy.trigger()
    text = QApplication.clipboard().text()
    assert "node-a" in text and "gpu_lost" in text and console.target not in text, text
    with qtbot.waitSignal(window.grid.gpuSelected) as opened:
        entry(menu, "Open GPU").trigger()
    assert opened.args == [console.target, 1]
    ack = entry(menu, "Acknowledge")
    assert ack.isEnabled()
    with qtbot.waitSignal(window.session.pump.commandFinished, timeout=10_000) as done:
        ack.trigger()
    assert done.args[0].ok, done.args[0].message
    qtbot.waitUntil(
        lambda: any(a.acknowledged for a in window.session.fleet.alerts.alerts()
                    if a.rule == "gpu_lost"),
        timeout=10_000,
    )  # fmt: skip
    # A viewer's console: the actions listed, disabled, with the reason.
    refused = alert_row_menu(
        panel, row.data(ALERT_ROLE), row, "viewers may not",
        lambda _a: None, lambda _a: None, lambda _t, _g: None,
    )  # fmt: skip
    assert entry(refused, "Silence").text().endswith("(viewers may not)")
    assert not entry(refused, "Silence").isEnabled() and entry(refused, "Copy summary").isEnabled()
