"""Render the screenshots of docs/alerts.md's live values and silences, under Xvfb.

    xvfb-run -a -s "-screen 0 1600x1000x24" \
        .venv/bin/python docs/screenshots/silence_screenshots.py [OUT_DIR]

Starts two simulated GPU servers in this process (on one, GPU 2 overheats,
then cools a little while its alert still fires), makes a silence for a maintenance window and one
that ends in 8 minutes, and writes alerts-live-values.png (the alert table's
Now and Peak), silences.png (the Silences page) and silence-new.png (the
New-silence dialog, prefilled from the overheating GPU's alert).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import grpc
from PySide6.QtCore import QItemSelectionModel
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication
from shot_tools import save_image, wait_until

from console.app import build_window, qt_application
from console.fleet.updates import LinkState
from console.main_window import MainWindow
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.backends.simulated import SimulatedBackend
from node_daemon.backends.simulated.scenario import Scenario, ScenarioEvent
from node_daemon.config import DaemonConfig
from node_daemon.listen import parse_listen_address
from node_daemon.server import NodeDaemon

OUT = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent
MINUTE_MS = 60_000


def save(image: QImage, name: str) -> None:
    save_image(image, OUT / name)


def daemon(tmp: Path, name: str, scenario: Scenario | None) -> NodeDaemon:
    config = DaemonConfig(listen="127.0.0.1:0", backend="simulated", sample_interval_s=0.25,
                          hostname=name, state_dir=tmp / name)  # fmt: skip
    backend = SimulatedBackend(gpu_count=8, model="h100", scenario=scenario, step_s=2.0)
    node = NodeDaemon(config, backend, parse_listen_address(config.listen))
    node.start()
    return node


def silence(stub: pb_grpc.NodeServiceStub, pairs: dict[str, str], start_ms: int, end_ms: int,
            comment: str, actor: str) -> None:  # fmt: skip
    matchers = [pb.SilenceMatcher(label=k, pattern=v) for k, v in pairs.items()]
    stub.CreateSilence(pb.CreateSilenceRequest(matchers=matchers, starts_unix_ms=start_ms,
                       ends_unix_ms=end_ms, comment=comment, actor=actor), timeout=5)  # fmt: skip


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    app = qt_application()
    # GPU 2 overheats, then cools a little: Now below Peak while the alert still fires.
    hot = Scenario((ScenarioEvent(1, 2, "overheat"), ScenarioEvent(70, 2, "cool")))
    with tempfile.TemporaryDirectory(prefix="gpufleet-shots-") as tmp:
        nodes = [daemon(Path(tmp), "gpu-node-01", hot), daemon(Path(tmp), "gpu-node-02", None)]
        targets = [str(n.address) for n in nodes]
        channels = [grpc.insecure_channel(t) for t in targets]
        stubs = [pb_grpc.NodeServiceStub(c) for c in channels]
        window = build_window(targets)
        window.resize(1600, 950)
        window.show()
        try:
            shoot(app, window, stubs)
        finally:
            window.session.stop()
            for channel in channels:
                channel.close()
            for node in nodes:
                node.stop(grace_s=0.5)
    return 0


def shoot(app: QApplication, window: MainWindow, stubs: list[pb_grpc.NodeServiceStub]) -> None:
    fleet = window.session.fleet
    wait_until(app, lambda: all(n.state is LinkState.CONNECTED and len(n.latest) == 8
                                for n in fleet))  # fmt: skip
    wait_until(app, lambda: any(a.rule == "gpu_temp" and a.firing and a.severity.label ==
                                "critical" for a in fleet.alerts.alerts()), 120)  # fmt: skip
    now = int(time.time() * 1000)
    for stub in stubs:
        silence(stub, {"node": "gpu-node-0*", "alertname": "ecc_*"}, now + 2 * 60 * MINUTE_MS,
                now + 6 * 60 * MINUTE_MS, "firmware update, rack 4", "erin")  # fmt: skip
    silence(stubs[1], {"node": "gpu-node-02", "alertname": "idle"}, 0, now + 8 * MINUTE_MS,
            "benchmark set-up, GPUs idle on purpose", "frank")  # fmt: skip
    wait_until(app, lambda: len(fleet.silences.silences()) == 3)
    wait_until(app, lambda: cooling(window), 180)
    window.grid.select(fleet.nodes()[0].target, 2)
    window.detail.show_gpu(fleet.nodes()[0].target, 2)
    window.alerts.toast.hide()
    window.tabs.setCurrentWidget(window.alerts.alerts_tab)
    window.alerts.alerts_tab.show_alerts()
    window.alerts.alert_model.refresh()
    app.processEvents()
    save(window.grab().toImage(), "alerts-live-values.png")
    window.alerts.alerts_tab.show_silences()
    window.alerts.toast.hide()
    app.processEvents()
    save(window.grab().toImage(), "silences.png")
    window.alerts.alerts_tab.show_alerts()
    panel = window.alerts.alert_panel
    row = next(r for r in range(panel.proxy.rowCount())
               if panel.proxy.index(r, 3).data() == "gpu_temp")  # fmt: skip
    panel.table.selectionModel().select(
        panel.proxy.index(row, 0),
        QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows,
    )
    panel.silence.click()
    dialog = window.alerts.silence_prompts.dialog
    assert dialog is not None
    dialog.comment.setText("GPU 2 fan replacement")  # type: ignore[union-attr]
    wait_until(app, lambda: dialog.isVisible())
    settle_ms = time.monotonic() + 0.5
    wait_until(app, lambda: time.monotonic() > settle_ms)
    save(dialog.grab().toImage(), "silence-new.png")
    dialog.reject()


def cooling(window: MainWindow) -> bool:
    """The hot GPU's temperature alert fires with its live value a few degrees below its peak."""
    for alert in window.session.fleet.alerts.alerts():
        if alert.rule == "gpu_temp" and alert.firing:
            live = window.alerts.alert_model.live(alert)
            return live.now is not None and live.peak is not None and live.peak - live.now >= 3
    return False


if __name__ == "__main__":
    sys.exit(main())
