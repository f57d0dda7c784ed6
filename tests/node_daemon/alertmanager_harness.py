"""A real Alertmanager (Debian's prometheus-alertmanager) and a recording HTTP server, for tests.

Each test starts its own Alertmanager on loopback whose only receiver is a webhook
served by the test, so what reaches the pager is what the test sees. TLS and basic
auth go through Alertmanager's own --web.config.file.
"""

from __future__ import annotations

import base64
import json
import shutil
import ssl
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from gpufleet.v1.alert_severity import Severity
from node_daemon.alerts.alertmanager import AlertmanagerPusher
from node_daemon.alerts.am_settings import AlertmanagerSettings
from node_daemon.alerts.model import AlertRecord
from tests.conftest import wait_for
from tests.tools import free_port

# installer/dev-setup.sh unpacks Debian's package into .tools/root (no service is
# installed or started); a system-wide install works too.
_UNPACKED = Path(__file__).resolve().parents[2] / ".tools/root/usr/bin/prometheus-alertmanager"
AM_BINARY = str(_UNPACKED) if _UNPACKED.exists() else "/usr/bin/prometheus-alertmanager"

Json = Any


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: Mapping[str, str]
    body: Json
    status: int = 200


class Recorder:
    """An HTTP server on 127.0.0.1:0 (own thread) that records every request with a JSON body.

    It answers POSTs with 200 and an empty body, as Alertmanager's /api/v2/alerts does, or
    with `failing` (an HTTP status) while that is set; a failed POST is recorded too.
    """

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.failing: int | None = None
        self._lock = threading.Lock()
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with recorder._lock:
                    status = recorder.failing or 200
                    recorder.requests.append(
                        Request("POST", self.path, dict(self.headers.items()), body, status)
                    )
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self) -> None:
                # An Alertmanager that holds nothing: [] for /api/v2/alerts and silences.
                with recorder._lock:
                    recorder.requests.append(
                        Request("GET", self.path, dict(self.headers.items()), None)
                    )
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"[]")

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="test-recorder"
        )
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def bodies(self) -> list[Json]:
        return self.snapshot()

    def snapshot(self) -> list[Json]:
        """The bodies of the POSTs answered 200 so far."""
        with self._lock:
            return [r.body for r in self.requests if r.method == "POST" and r.status == 200]

    def recorded(self) -> list[Request]:
        with self._lock:
            return list(self.requests)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


@dataclass
class Alertmanager:
    """A running Alertmanager; its own requests use the CA and credentials it was started with."""

    url: str
    webhook: Recorder
    context: ssl.SSLContext | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def get(self, path: str) -> Json:
        request = urllib.request.Request(f"{self.url}{path}", headers=self.headers)
        with urllib.request.urlopen(request, timeout=5, context=self.context) as response:
            return json.loads(response.read())

    def alerts(self) -> list[Json]:
        """GET /api/v2/alerts: the alerts Alertmanager holds (active, silenced, inhibited)."""
        return self.get("/api/v2/alerts")  # type: ignore[no-any-return]

    def alert(self, labels: Mapping[str, str]) -> Json | None:
        """The held alert with exactly `labels`, or None."""
        return next((a for a in self.alerts() if a["labels"] == dict(labels)), None)

    def silences(self) -> list[Json]:
        return self.get("/api/v2/silences")  # type: ignore[no-any-return]

    def notified(self, status: str, labels: Mapping[str, str]) -> bool:
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


def basic_auth_header(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def is_ready(am: Alertmanager) -> bool:
    request = urllib.request.Request(f"{am.url}/-/ready", headers=am.headers)
    try:
        with urllib.request.urlopen(request, timeout=1, context=am.context) as response:
            return response.status == 200
    except OSError:
        return False


def require_alertmanager() -> None:
    if shutil.which(AM_BINARY) is None:
        pytest.skip(
            f"!!! prometheus-alertmanager NOT INSTALLED: {AM_BINARY} missing, Alertmanager tests "
            "SKIPPED. The project's test command (installer/dev-setup.sh test) installs it; "
            "on non-Debian install it by hand !!!"
        )


@dataclass
class AlertmanagerProcess:
    """Start (and restart) one Alertmanager with a fixed port, config and storage."""

    directory: Path
    webhook: Recorder
    web_config: str | None = None
    context: ssl.SSLContext | None = None
    headers: dict[str, str] = field(default_factory=dict)
    config: str | None = None  # Alertmanager's YAML; default am_config(webhook.url)
    port: int = field(default_factory=free_port)
    _process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        scheme = "https" if self.web_config and "tls_server_config" in self.web_config else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    def start(self) -> Alertmanager:
        require_alertmanager()
        config_path = self.directory / "alertmanager.yml"
        config_path.write_text(self.config or am_config(self.webhook.url))
        storage = self.directory / "data"
        listen = f"--web.listen-address=127.0.0.1:{self.port}"
        args = [AM_BINARY, f"--config.file={config_path}", f"--storage.path={storage}", listen,
                "--cluster.listen-address="]  # fmt: skip
        if self.web_config is not None:
            web = self.directory / "web.yml"
            web.write_text(self.web_config)
            args.append(f"--web.config.file={web}")
        log_path = self.directory / "alertmanager.log"
        with log_path.open("ab") as log_file:
            self._process = subprocess.Popen(args, stdout=log_file, stderr=subprocess.STDOUT)
        am = Alertmanager(self.url, self.webhook, self.context, dict(self.headers))
        process = self._process
        wait_for(lambda: is_ready(am) or process.poll() is not None, 20, "Alertmanager ready")
        assert process.poll() is None, f"Alertmanager exited:\n{log_path.read_text()}"
        return am

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    server = Recorder()
    yield server
    server.close()


@pytest.fixture
def am_process(tmp_path: Path, recorder: Recorder) -> Iterator[Callable[..., AlertmanagerProcess]]:
    """Make Alertmanager processes (each started by the test); all stop after the test."""
    made: list[AlertmanagerProcess] = []

    def make(**kwargs: Any) -> AlertmanagerProcess:
        directory = tmp_path / f"am{len(made)}"
        directory.mkdir()
        process = AlertmanagerProcess(directory, recorder, **kwargs)
        made.append(process)
        return process

    yield make
    for process in made:
        process.stop()


@pytest.fixture
def alertmanager(am_process: Callable[..., AlertmanagerProcess]) -> Alertmanager:
    """A real Alertmanager on loopback (plain http, no clustering) that notifies `recorder`."""
    return am_process().start()


def query(path: str, **params: str) -> str:
    return f"{path}?{urllib.parse.urlencode(params)}"


# --- the pusher's side ---------------------------------------------------------------------

NODE = {"node": "gpu-node-01"}
UUID = "GPU-5f3c1a2e-0000-4000-8000-000000000003"
FIXED_NOW_S = 1_700_000_000.0  # 2023-11-14T22:13:20Z
EXPECTED_LABELS = {
    "alertname": "gpu_temp", "severity": "warning", "node": "gpu-node-01", "gpu": "3", "UUID": UUID,
}  # fmt: skip


def settings(urls: list[str], **changes: Any) -> AlertmanagerSettings:
    """Settings for a test: no watchdog unless asked for, so bodies hold only the test's alerts."""
    changes.setdefault("watchdog", False)
    return AlertmanagerSettings(urls=tuple(urls), **changes)


@pytest.fixture
def make_pusher() -> Iterator[Callable[..., AlertmanagerPusher]]:
    """Start pushers for a test (settings(urls, **changes), NODE labels); all stop after it."""
    pushers: list[AlertmanagerPusher] = []

    def make(
        urls: list[str],
        clock: Callable[[], float] = time.time,
        node_labels: Mapping[str, str] = NODE,
        **changes: Any,
    ) -> AlertmanagerPusher:
        pusher = AlertmanagerPusher(settings(urls, **changes), node_labels, clock=clock)
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


def active_in(am: Alertmanager, labels: Mapping[str, str]) -> bool:
    return any(a["labels"] == labels and a["status"]["state"] == "active" for a in am.alerts())


def alerts_of(body: Json, labels: Mapping[str, str]) -> list[Json]:
    return [a for a in body if a["labels"] == labels]


def received(recorder: Recorder, labels: Mapping[str, str]) -> Callable[[], bool]:
    return lambda: any(alerts_of(body, labels) for body in recorder.snapshot())
