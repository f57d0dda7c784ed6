"""AlertmanagerPusher against a real Alertmanager (Debian's prometheus-alertmanager).

Each Alertmanager test starts its own Alertmanager on loopback whose only
receiver is a webhook served by the test, so what reaches the pager is what the
test sees. Tests of timing details point the pusher at a recording HTTP server.
"""

from __future__ import annotations

import json
import logging
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from node_daemon.alerts.alertmanager import THREAD_NAME, AlertmanagerPusher
from node_daemon.alerts.model import AlertRecord, Severity
from node_daemon.backends.simulated import SimulatedBackend
from node_daemon.backends.simulated.scenario import Scenario, ScenarioEvent
from tests.conftest import DaemonFactory, wait_for
from tests.tools import free_port

# installer/dev-setup.sh unpacks Debian's package into .tools/root (no service is
# installed or started); a system-wide install works too.
_UNPACKED = Path(__file__).resolve().parents[2] / ".tools/root/usr/bin/prometheus-alertmanager"
AM_BINARY = str(_UNPACKED) if _UNPACKED.exists() else "/usr/bin/prometheus-alertmanager"
NODE = {"node": "gpu-node-01"}
UUID = "GPU-5f3c1a2e-0000-4000-8000-000000000003"
FIXED_NOW_S = 1_700_000_000.0  # 2023-11-14T22:13:20Z

Json = Any


class Recorder:
    """An HTTP server on 127.0.0.1:0 (own thread) that records the JSON body of every POST."""

    def __init__(self) -> None:
        self.bodies: list[Json] = []
        self._lock = threading.Lock()
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with recorder._lock:
                    recorder.bodies.append(body)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="test-recorder"
        )
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def snapshot(self) -> list[Json]:
        with self._lock:
            return list(self.bodies)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


@dataclass
class Alertmanager:
    url: str
    webhook: Recorder

    def alerts(self) -> list[Json]:
        """GET /api/v2/alerts: the alerts Alertmanager holds (active, silenced, inhibited)."""
        with urllib.request.urlopen(f"{self.url}/api/v2/alerts", timeout=5) as response:
            return json.loads(response.read())  # type: ignore[no-any-return]

    def notified(self, status: str, labels: dict[str, str]) -> bool:
        """Whether the webhook got a notification with an alert of `status` carrying `labels`."""
        return any(
            alert["status"] == status and labels.items() <= alert["labels"].items()
            for body in self.webhook.snapshot()
            for alert in body["alerts"]
        )


def am_config(webhook_url: str) -> str:
    # group_by '...' makes every alert its own group, so each notifies at once.
    return f"""
route:
  receiver: hook
  group_by: ['...']
  group_wait: 0s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: hook
    webhook_configs:
      - url: {webhook_url}/hook
        send_resolved: true
"""


def is_ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as response:
            return response.status == 200
    except OSError:
        return False


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    server = Recorder()
    yield server
    server.close()


@pytest.fixture
def alertmanager(tmp_path: Path, recorder: Recorder) -> Iterator[Alertmanager]:
    """A real Alertmanager on loopback (no clustering) that notifies `recorder`."""
    if shutil.which(AM_BINARY) is None:
        pytest.skip(
            f"!!! prometheus-alertmanager NOT INSTALLED: {AM_BINARY} missing, Alertmanager tests "
            "SKIPPED. The project's test command (installer/dev-setup.sh test) installs it; "
            "on non-Debian install it by hand !!!"
        )
    config = tmp_path / "alertmanager.yml"
    config.write_text(am_config(recorder.url))
    port = free_port()
    log_path = tmp_path / "alertmanager.log"
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(
            [AM_BINARY, f"--config.file={config}", f"--storage.path={tmp_path / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="],
            stdout=log_file, stderr=subprocess.STDOUT,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: is_ready(url) or process.poll() is not None, 20, "Alertmanager ready")
        assert process.poll() is None, f"Alertmanager exited:\n{log_path.read_text()}"
        yield Alertmanager(url, recorder)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def make_pusher() -> Iterator[Callable[..., AlertmanagerPusher]]:
    """Start pushers for a test; every one is stopped after it."""
    pushers: list[AlertmanagerPusher] = []

    def make(urls: list[str], **kwargs: Any) -> AlertmanagerPusher:
        pusher = AlertmanagerPusher(urls, NODE, **kwargs)
        pusher.start()
        pushers.append(pusher)
        return pusher

    yield make
    for pusher in pushers:
        pusher.stop()


def gpu_alert(now_s: float | None = None, **changes: Any) -> AlertRecord:
    now_ms = int((time.time() if now_s is None else now_s) * 1000)
    alert = AlertRecord(
        id="alert-1", key=f"gpu_temp:{UUID}", rule="gpu_temp", severity=Severity.WARNING,
        firing=True, gpu_index=3, gpu_uuid=UUID, pid=None, value=78.0, unit="°C",
        summary="GPU 3 temperature 78 °C", started_unix_ms=now_ms - 5000, updated_unix_ms=now_ms,
    )  # fmt: skip
    return replace(alert, **changes)


def cleared(alert: AlertRecord, at_ms: int) -> AlertRecord:
    return replace(alert, firing=False, cleared_unix_ms=at_ms, updated_unix_ms=at_ms)


EXPECTED_LABELS = {
    "alertname": "gpu_temp", "severity": "warning", "node": "gpu-node-01", "gpu": "3", "UUID": UUID,
}  # fmt: skip


def active_in(am: Alertmanager, labels: dict[str, str]) -> bool:
    return any(a["labels"] == labels and a["status"]["state"] == "active" for a in am.alerts())


# --- against a real Alertmanager -------------------------------------------------------------


def test_firing_alert_reaches_alertmanager_and_the_pager(
    alertmanager: Alertmanager, make_pusher: Callable[..., AlertmanagerPusher]
) -> None:
    pusher = make_pusher([alertmanager.url])
    pusher.publish([gpu_alert()])

    wait_for(lambda: active_in(alertmanager, EXPECTED_LABELS), 10, "alert active in Alertmanager")
    wait_for(lambda: alertmanager.notified("firing", EXPECTED_LABELS), 10, "firing notification")
    [held] = alertmanager.alerts()
    assert held["annotations"]["summary"] == "GPU 3 temperature 78 °C"
    assert held["annotations"]["description"] == "gpu_temp, value 78°C, occurrences 1"
    assert pusher.failed_batches == 0


def test_cleared_alert_resolves_in_alertmanager(
    alertmanager: Alertmanager, make_pusher: Callable[..., AlertmanagerPusher]
) -> None:
    pusher = make_pusher([alertmanager.url])
    alert = gpu_alert()
    pusher.publish([alert])
    wait_for(lambda: alertmanager.notified("firing", EXPECTED_LABELS), 10, "firing notification")

    pusher.publish([cleared(alert, int(time.time() * 1000))])

    wait_for(lambda: alertmanager.notified("resolved", EXPECTED_LABELS), 10, "resolved notice")
    wait_for(lambda: not active_in(alertmanager, EXPECTED_LABELS), 10, "alert no longer active")


def test_unreachable_url_does_not_hold_back_the_real_one(
    alertmanager: Alertmanager, caplog: pytest.LogCaptureFixture
) -> None:
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    pusher = AlertmanagerPusher([closed, alertmanager.url], NODE, resend_s=0.2, timeout_s=2.0)
    pusher.start()
    try:
        with caplog.at_level(logging.WARNING, logger="node_daemon.alerts.alertmanager"):
            pusher.publish([gpu_alert()])
            wait_for(lambda: active_in(alertmanager, EXPECTED_LABELS), 3, "alert reached real AM")
            wait_for(lambda: pusher.failed_batches >= 3, 10, "several failed retries")
            wait_for(lambda: pusher.sent_batches >= 3, 10, "the real one got the resends")
        stats = pusher.url_stats()
        assert stats[closed].down and stats[closed].sent_batches == 0
        assert stats[alertmanager.url].failed_batches == 0
        warnings = [r for r in caplog.records if closed in r.getMessage()]
        assert len(warnings) == 1, "one warning per outage, not one per retry"
    finally:
        pusher.stop()
    assert not [t for t in threading.enumerate() if t.name == THREAD_NAME]
    pusher.stop()  # idempotent


# --- wire details, against a recording HTTP server -----------------------------------------


def alerts_of(body: Json, labels: dict[str, str]) -> list[Json]:
    return [a for a in body if a["labels"] == labels]


def test_firing_alert_is_resent_with_a_moving_end(
    recorder: Recorder, make_pusher: Callable[..., AlertmanagerPusher]
) -> None:
    now = [FIXED_NOW_S]
    pusher = make_pusher([recorder.url], resend_s=0.3, clock=lambda: now[0])
    pusher.publish([gpu_alert(FIXED_NOW_S)])
    wait_for(lambda: len(recorder.snapshot()) >= 1, 5, "first POST")
    now[0] += 10  # each resend must move endsAt with the clock
    wait_for(lambda: len(recorder.snapshot()) >= 3, 5, "two resends")

    first, *resends = recorder.snapshot()
    assert first == [
        {
            "labels": EXPECTED_LABELS,
            "annotations": {
                "summary": "GPU 3 temperature 78 °C",
                "description": "gpu_temp, value 78°C, occurrences 1",
            },
            "startsAt": "2023-11-14T22:13:15.000Z",
            "endsAt": "2023-11-14T22:13:21.200Z",  # now + 4 x 0.3 s
        }
    ]
    # endsAt follows the clock at each send (the clock moved while the first resend was due).
    ends = [body[0]["endsAt"] for body in resends]
    assert set(ends) <= {"2023-11-14T22:13:21.200Z", "2023-11-14T22:13:31.200Z"}
    assert ends[-1] == "2023-11-14T22:13:31.200Z"
    # The server records a body before it answers; the pusher counts it after the answer.
    wait_for(lambda: pusher.sent_batches >= 3, 5, "three POSTs counted as sent")


def test_cleared_alert_is_sent_once_resolved_then_forgotten(
    recorder: Recorder, make_pusher: Callable[..., AlertmanagerPusher]
) -> None:
    pusher = make_pusher([recorder.url], resend_s=0.2, clock=lambda: FIXED_NOW_S)
    hot = gpu_alert(FIXED_NOW_S)
    pusher.publish([hot])
    wait_for(lambda: len(recorder.snapshot()) >= 1, 5, "first POST")
    seen = len(recorder.snapshot())

    other_labels = {**EXPECTED_LABELS, "gpu": "4", "UUID": "GPU-other"}
    pusher.publish([cleared(hot, int(FIXED_NOW_S * 1000) + 2000)])
    pusher.publish([gpu_alert(FIXED_NOW_S, key="other", gpu_index=4, gpu_uuid="GPU-other")])

    def other_resent_twice() -> bool:
        return sum(bool(alerts_of(b, other_labels)) for b in recorder.snapshot()[seen:]) >= 3

    wait_for(other_resent_twice, 5, "the other alert sent and resent")
    mentions = [alerts_of(b, EXPECTED_LABELS) for b in recorder.snapshot()[seen:]]
    # A resend of the firing alert may have been on the wire when it cleared.
    resolved = [a for found in mentions for a in found if a["endsAt"] == "2023-11-14T22:13:22.000Z"]
    assert len(resolved) == 1
    last_mention = max(i for i, found in enumerate(mentions) if found)
    assert mentions[last_mention] == resolved
    assert last_mention < len(mentions) - 2, "forgotten: not in the later resends"


def test_new_severity_resolves_the_old_label_set(
    recorder: Recorder, make_pusher: Callable[..., AlertmanagerPusher]
) -> None:
    pusher = make_pusher([recorder.url], clock=lambda: FIXED_NOW_S)
    warning = gpu_alert(FIXED_NOW_S)
    pusher.publish([warning])
    wait_for(lambda: len(recorder.snapshot()) >= 1, 5, "first POST")
    later_ms = int(FIXED_NOW_S * 1000) + 1000
    pusher.publish([replace(warning, severity=Severity.CRITICAL, updated_unix_ms=later_ms)])
    wait_for(lambda: len(recorder.snapshot()) >= 2, 5, "second POST")

    body = recorder.snapshot()[1]
    [old] = alerts_of(body, EXPECTED_LABELS)
    [new] = alerts_of(body, {**EXPECTED_LABELS, "severity": "critical"})
    assert old["endsAt"] == "2023-11-14T22:13:21.000Z"  # resolved when it escalated
    assert new["endsAt"] == "2023-11-14T22:15:20.000Z"  # firing: now + 4 x 30 s
    assert new["startsAt"] == old["startsAt"]


def received(recorder: Recorder, labels: dict[str, str]) -> Callable[[], bool]:
    return lambda: any(alerts_of(body, labels) for body in recorder.snapshot())


def test_publish_never_waits_for_a_stalled_alertmanager(
    recorder: Recorder, make_pusher: Callable[..., AlertmanagerPusher]
) -> None:
    with socket.socket() as stalled:
        stalled.bind(("127.0.0.1", 0))
        stalled.listen(8)
        stalled.settimeout(5)
        pusher = make_pusher([f"http://127.0.0.1:{stalled.getsockname()[1]}", recorder.url],
                             timeout_s=2.0)  # fmt: skip
        pusher.publish([gpu_alert()])
        connection, _ = stalled.accept()  # the pusher now waits for an answer that never comes
        with connection:
            started = time.monotonic()
            pusher.publish([gpu_alert(key="second", gpu_index=4)])
            assert time.monotonic() - started < 0.1
            wait_for(lambda: pusher.failed_batches == 1, 5, "the stalled URL times out")
        wait_for(received(recorder, {**EXPECTED_LABELS, "gpu": "4"}), 2, "alert of GPU 4")

        # Known down now: skipped until the next resend (30 s), so nothing waits on it.
        for gpu in (5, 6):
            pusher.publish([gpu_alert(key=f"gpu{gpu}", gpu_index=gpu)])
            labels = {**EXPECTED_LABELS, "gpu": str(gpu)}
            wait_for(received(recorder, labels), 1.0, f"alert of GPU {gpu}, well within 2 s")
        assert pusher.failed_batches == 1
        pusher.stop()


def test_rejects_node_labels_alertmanager_would_refuse_or_we_would_overwrite() -> None:
    with pytest.raises(ValueError, match="clashes"):
        AlertmanagerPusher(["http://127.0.0.1:9093"], {"severity": "x"})
    with pytest.raises(ValueError, match="invalid"):
        AlertmanagerPusher(["http://127.0.0.1:9093"], {"node-name": "x"})
    with pytest.raises(ValueError, match="http"):
        AlertmanagerPusher(["127.0.0.1:9093"], NODE)


def test_daemon_pushes_a_lost_gpu_and_its_recovery(
    alertmanager: Alertmanager, start_daemon: DaemonFactory
) -> None:
    """End to end: the daemon's own rules raise it, its pusher delivers it."""
    scenario = Scenario((ScenarioEvent(0.3, 1, "lost"), ScenarioEvent(2.0, 1, "recover")))
    backend = SimulatedBackend(gpu_count=2, scenario=scenario, step_s=0.1)
    daemon = start_daemon(backend=backend, hostname="gpu-node-09",
                          alertmanager_urls=(alertmanager.url,))  # fmt: skip
    wait_for(lambda: daemon.sampler.status.ok)
    uuid = daemon.sampler.status.facts.gpus[1].uuid
    labels = {"alertname": "gpu_lost", "severity": "critical", "node": "gpu-node-09",
              "gpu": "1", "UUID": uuid}  # fmt: skip
    wait_for(lambda: active_in(alertmanager, labels), 10, "the lost GPU in Alertmanager")
    wait_for(lambda: alertmanager.notified("firing", labels), 10, "a firing page")
    wait_for(lambda: not active_in(alertmanager, labels), 15, "its resolution")
    wait_for(lambda: alertmanager.notified("resolved", labels), 10, "a resolved page")
