"""The shipped Prometheus rules and example Alertmanager config, checked by the real tools.

promtool (Debian's prometheus) runs the rules' own unit tests; amtool (Debian's
prometheus-alertmanager) checks the example config and its routes; a real
Alertmanager running the example shows what GpufleetDaemonDown inhibits.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from gpufleet.v1.alert_severity import Severity
from node_daemon.alerts.alertmanager import AlertmanagerPusher
from tests.conftest import wait_for
from tests.node_daemon.alertmanager_harness import (
    EXPECTED_LABELS,
    AlertmanagerProcess,
    Recorder,
    gpu_alert,
)
from tests.tools import require_tool

ROOT = Path(__file__).resolve().parents[2]
RULES_DIR = ROOT / "resources" / "prometheus"
EXAMPLE = ROOT / "resources" / "alertmanager" / "gpufleet-example.yml"


def run(args: list[str], cwd: Path = ROOT) -> str:
    """The tool's standard output; it must succeed."""
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_rules_are_valid_and_pass_their_unit_tests() -> None:
    promtool = require_tool("promtool", "prometheus", "the shipped Prometheus rules")
    assert "SUCCESS: 1 rules found" in run([promtool, "check", "rules", "gpufleet-rules.yml"],
                                           cwd=RULES_DIR)  # fmt: skip
    assert "SUCCESS" in run([promtool, "test", "rules", "gpufleet-rules.test.yml"], cwd=RULES_DIR)


def test_rule_unit_tests_can_fail(tmp_path: Path) -> None:
    """A rule that waited longer than 30 s would fail the shipped unit tests."""
    promtool = require_tool("promtool", "prometheus", "the shipped Prometheus rules")
    slower = (RULES_DIR / "gpufleet-rules.yml").read_text().replace("for: 30s", "for: 45s")
    (tmp_path / "gpufleet-rules.yml").write_text(slower)
    (tmp_path / "t.yml").write_text((RULES_DIR / "gpufleet-rules.test.yml").read_text())
    done = subprocess.run([promtool, "test", "rules", "t.yml"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode != 0 and "FAILED" in done.stdout + done.stderr


def test_example_alertmanager_config_is_valid() -> None:
    amtool = require_tool("amtool", "prometheus-alertmanager", "the example Alertmanager config")
    output = run([amtool, "check-config", str(EXAMPLE)])
    assert "SUCCESS" in output and "1 inhibit rules" in output


@pytest.mark.parametrize(
    ("labels", "receiver"),
    [
        (["alertname=GpufleetWatchdog", "severity=none", "node=gpu-node-01"], "deadmans-switch"),
        (["alertname=GpufleetDaemonDown", "severity=critical", "node=gpu-node-01"], "oncall"),
        (["alertname=gpu_lost", "severity=critical", "node=gpu-node-01"], "oncall"),
        (["alertname=gpu_temp", "severity=warning", "node=gpu-node-01"], "oncall"),
        (["alertname=throttle", "severity=info", "node=gpu-node-01"], "chat"),
    ],
)
def test_example_routes(labels: list[str], receiver: str) -> None:
    amtool = require_tool("amtool", "prometheus-alertmanager", "the example Alertmanager config")
    output = run([amtool, "config", "routes", "test", f"--config.file={EXAMPLE}", *labels])
    assert output.strip() == receiver


def test_daemon_down_inhibits_the_node_s_warnings_never_its_criticals(
    am_process: Callable[..., AlertmanagerProcess],
    recorder: Recorder,
    make_pusher: Callable[..., AlertmanagerPusher],
) -> None:
    """The example config, running: what on-call still sees of a node whose daemon is down."""
    config = EXAMPLE.read_text()
    for url in ("http://pager-bridge.example:8080", "http://chat-bridge.example:8080",
                "https://heartbeat.example"):  # fmt: skip
        config = config.replace(url, recorder.url)
    am = am_process(config=config).start()
    node1 = make_pusher([am.url])
    node2 = make_pusher([am.url], node_labels={"node": "gpu-node-02"})
    critical = gpu_alert(key="lost", rule="gpu_lost", severity=Severity.CRITICAL, gpu_index=5)
    node1.publish([gpu_alert(), critical])
    node2.publish([gpu_alert()])
    # What Prometheus sends for gpu-node-01 (gpufleet-rules.yml), pushed here by hand.
    down = {"alertname": "GpufleetDaemonDown", "severity": "critical", "job": "gpufleet",
            "instance": "gpu-node-01:9401", "node": "gpu-node-01"}  # fmt: skip
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    request = urllib.request.Request(
        f"{am.url}/api/v2/alerts", method="POST", headers={"Content-Type": "application/json"},
        data=json.dumps([{"labels": down, "startsAt": now}]).encode(),
    )  # fmt: skip
    urllib.request.urlopen(request, timeout=5).close()

    warning1 = EXPECTED_LABELS
    critical1 = {**EXPECTED_LABELS, "alertname": "gpu_lost", "severity": "critical", "gpu": "5"}
    warning2 = {**EXPECTED_LABELS, "node": "gpu-node-02"}

    def state(labels: dict[str, str]) -> str | None:
        alert = am.alert(labels)
        return None if alert is None else str(alert["status"]["state"])

    wait_for(lambda: state(warning1) == "suppressed", 10, "gpu-node-01's warning inhibited")
    # gpu-node-02 pushes on its own: its warning may arrive after gpu-node-01's is inhibited
    # (a loaded machine asserted before it had, and found none).
    wait_for(lambda: state(warning2) is not None, 10, "gpu-node-02's warning received")
    assert am.alert(warning1)["status"]["inhibitedBy"] != []
    assert state(critical1) == "active", "a dead node's critical still pages"
    assert state(warning2) == "active", "another node's warning is not inhibited"
    assert state(down) == "active"
