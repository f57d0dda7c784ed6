"""Alertmanager fit against a real Alertmanager: labels, TLS, credentials, watchdog, held criticals.

TLS and basic auth are Alertmanager's own (--web.config.file); Alertmanager cannot
check a bearer token, so that one is checked by the recording HTTP server.
"""

from __future__ import annotations

import logging
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import bcrypt
import pytest

from gpufleet.v1.alert_severity import Severity
from node_daemon.alerts.alertmanager import WATCHDOG_ALERTNAME, AlertmanagerPusher
from node_daemon.alerts.am_settings import AlertmanagerSettings, BasicAuth, BearerToken
from node_daemon.alerts.am_silences import parse_rfc3339_ms
from node_daemon.backends.simulated import SimulatedBackend
from node_daemon.backends.simulated.scenario import Scenario, ScenarioEvent
from tests.certs import Authority, write
from tests.conftest import DaemonFactory, wait_for
from tests.node_daemon.alertmanager_harness import (
    EXPECTED_LABELS,
    NODE,
    Alertmanager,
    AlertmanagerProcess,
    Recorder,
    active_in,
    alerts_of,
    basic_auth_header,
    cleared,
    gpu_alert,
    received,
)

DAY_MS = 86_400_000
SITE_LABELS = {"cluster": "a", "site": "b", "rack": "r1"}


def watchdog_labels(node: str, **extra: str) -> dict[str, str]:
    return {"node": node, **extra, "alertname": WATCHDOG_ALERTNAME, "severity": "none"}


def held(am: Alertmanager, labels: dict[str, str]) -> dict[str, object] | None:
    return am.alert(labels)  # type: ignore[no-any-return]


# --- TLS and credentials ---------------------------------------------------------------------


@dataclass(frozen=True)
class TlsAlertmanagers:
    """Https Alertmanagers whose certificates are from `authority`, files in `tmp_path`."""

    am_process: Callable[..., AlertmanagerProcess]
    tmp_path: Path
    authority: Authority

    @property
    def ca_file(self) -> Path:
        return self.tmp_path / "ca.crt"

    def start(
        self,
        extra: str = "",
        headers: dict[str, str] | None = None,
        client: tuple[Path, Path] | None = None,
    ) -> tuple[Alertmanager, Path]:
        """One started (`extra`: more of its web config); the CA file's path."""
        ca = self.ca_file
        ca.write_bytes(self.authority.pem)
        server = self.authority.issue("127.0.0.1", server=True)
        cert, key = write(self.tmp_path, "server", server)
        web = f"tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n{extra}"
        context = ssl.create_default_context(cafile=ca)
        if client is not None:
            context.load_cert_chain(*client)
        process = self.am_process(web_config=web, context=context, headers=headers or {})
        return process.start(), ca

    def client_certificate(self) -> tuple[Path, Path]:
        """A client certificate and key from `authority` (for mutual TLS)."""
        return write(self.tmp_path, "client", self.authority.issue("gpufleet-node"))


@pytest.fixture
def tls(am_process: Callable[..., AlertmanagerProcess], tmp_path: Path) -> TlsAlertmanagers:
    return TlsAlertmanagers(am_process, tmp_path, Authority())


def test_https_with_the_configured_ca(
    tls: TlsAlertmanagers,
    make_pusher: Callable[..., AlertmanagerPusher],
    caplog: pytest.LogCaptureFixture,
) -> None:
    am, ca = tls.start()
    assert am.url.startswith("https://")
    trusting = make_pusher([am.url], ca_file=ca)
    trusting.publish([gpu_alert()])
    wait_for(lambda: active_in(am, EXPECTED_LABELS), 10, "the alert over https")
    assert trusting.failed_batches == 0

    # Without ca_file the system CAs are used, and they do not know this server.
    with caplog.at_level(logging.WARNING, logger="node_daemon.alerts.alertmanager"):
        system_cas = make_pusher([am.url])
        system_cas.publish([gpu_alert()])
        wait_for(lambda: system_cas.failed_batches >= 1, 10, "a refused certificate")
    assert system_cas.sent_batches == 0
    assert any("CERTIFICATE_VERIFY_FAILED" in r.getMessage() for r in caplog.records)


def test_mutual_tls_with_a_client_certificate(
    tls: TlsAlertmanagers, make_pusher: Callable[..., AlertmanagerPusher]
) -> None:
    client = tls.client_certificate()
    extra = f"  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {tls.ca_file}\n"
    am, ca = tls.start(extra, client=client)

    with_cert = make_pusher([am.url], ca_file=ca, cert_file=client[0], key_file=client[1])
    with_cert.publish([gpu_alert()])
    wait_for(lambda: active_in(am, EXPECTED_LABELS), 10, "the alert over mutual TLS")

    without = make_pusher([am.url], ca_file=ca)
    without.publish([gpu_alert(key="other", gpu_index=4)])
    wait_for(lambda: without.failed_batches >= 1, 10, "refused without a client certificate")
    assert without.sent_batches == 0


def test_basic_auth(
    tls: TlsAlertmanagers,
    make_pusher: Callable[..., AlertmanagerPusher],
    caplog: pytest.LogCaptureFixture,
) -> None:
    password = "correct horse battery staple"
    digest = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4)).decode()
    users = f"basic_auth_users:\n  gpufleet: {digest}\n"
    am, ca = tls.start(users, headers=basic_auth_header("gpufleet", password))
    good = make_pusher([am.url], ca_file=ca, auth=BasicAuth("gpufleet", password))
    good.publish([gpu_alert()])
    wait_for(lambda: active_in(am, EXPECTED_LABELS), 10, "the alert with basic auth")

    with caplog.at_level(logging.DEBUG):
        wrong = make_pusher([am.url], ca_file=ca, auth=BasicAuth("gpufleet", "wrong-pw-123"))
        wrong.publish([gpu_alert()])
        wait_for(lambda: wrong.failed_batches >= 1, 10, "refused with a wrong password")
    assert wrong.sent_batches == 0
    assert any("HTTP 401" in r.getMessage() for r in caplog.records)
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "wrong-pw-123" not in logged and password not in logged


def test_basic_auth_over_plain_http_to_loopback(
    am_process: Callable[..., AlertmanagerProcess], make_pusher: Callable[..., AlertmanagerPusher]
) -> None:
    digest = bcrypt.hashpw(b"pw", bcrypt.gensalt(rounds=4)).decode()
    am = am_process(
        web_config=f"basic_auth_users:\n  am: {digest}\n", headers=basic_auth_header("am", "pw")
    ).start()
    assert am.url.startswith("http://127.0.0.1")
    make_pusher([am.url], auth=BasicAuth("am", "pw")).publish([gpu_alert()])
    wait_for(lambda: active_in(am, EXPECTED_LABELS), 10, "the alert with basic auth")


def test_bearer_token_is_sent_in_the_authorization_header(
    recorder: Recorder, make_pusher: Callable[..., AlertmanagerPusher]
) -> None:
    make_pusher([recorder.url], auth=BearerToken("tok-abc")).publish([gpu_alert()])
    wait_for(received(recorder, EXPECTED_LABELS), 5, "the alert")
    [post] = [r for r in recorder.recorded() if r.method == "POST"]
    assert post.headers["Authorization"] == "Bearer tok-abc"
    assert post.path == "/api/v2/alerts"


# --- what is pushed ----------------------------------------------------------------------------


def test_held_critical_ends_a_day_ahead_a_warning_after_four_resends(
    alertmanager: Alertmanager, make_pusher: Callable[..., AlertmanagerPusher]
) -> None:
    pusher = make_pusher([alertmanager.url], resend_interval_s=2)
    critical = gpu_alert(key="crit", severity=Severity.CRITICAL, gpu_index=5, peak_value=91.0)
    sent_ms = int(time.time() * 1000)
    pusher.publish([gpu_alert(), critical])
    critical_labels = {**EXPECTED_LABELS, "severity": "critical", "gpu": "5"}
    wait_for(lambda: active_in(alertmanager, critical_labels), 10, "the critical")
    wait_for(lambda: active_in(alertmanager, EXPECTED_LABELS), 10, "the warning")

    crit = alertmanager.alert(critical_labels)
    warn = alertmanager.alert(EXPECTED_LABELS)
    assert parse_rfc3339_ms(crit["endsAt"]) >= sent_ms + DAY_MS
    assert parse_rfc3339_ms(warn["endsAt"]) < sent_ms + DAY_MS / 2
    assert crit["annotations"]["description"] == "gpu_temp, value 78°C, peak 91°C, occurrences 1"
    confirmed = parse_rfc3339_ms(crit["annotations"]["last_confirmed"])
    assert sent_ms - 1000 <= confirmed <= parse_rfc3339_ms(crit["endsAt"]) - DAY_MS + 1000


def test_a_held_critical_s_resolution_outlasts_an_outage_a_warning_s_does_not(
    recorder: Recorder, make_pusher: Callable[..., AlertmanagerPusher]
) -> None:
    pusher = make_pusher([recorder.url], resend_interval_s=0.1)
    warning = gpu_alert()
    critical = gpu_alert(key="crit", severity=Severity.CRITICAL, gpu_index=5)
    critical_labels = {**EXPECTED_LABELS, "severity": "critical", "gpu": "5"}
    pusher.publish([warning, critical])
    wait_for(received(recorder, critical_labels), 5, "both alerts delivered")

    recorder.failing = 503
    now_ms = int(time.time() * 1000)
    pusher.publish([cleared(warning, now_ms), cleared(critical, now_ms)])
    # Twice the 4 resends a warning's resolution is kept for.
    wait_for(lambda: pusher.failed_batches >= 9, 10, "an outage of 9 resends")
    delivered = len(recorder.snapshot())
    recorder.failing = None

    def resolved_delivered() -> bool:
        return any(alerts_of(b, critical_labels) for b in recorder.snapshot()[delivered:])

    wait_for(resolved_delivered, 5, "the critical's resolution after the outage")
    after = recorder.snapshot()[delivered:]
    [resolution] = next(
        alerts_of(b, critical_labels) for b in after if alerts_of(b, critical_labels)
    )
    assert parse_rfc3339_ms(resolution["endsAt"]) == now_ms
    assert not any(alerts_of(b, EXPECTED_LABELS) for b in after), "the warning's was dropped"


def test_resend_interval_is_honoured(
    recorder: Recorder, make_pusher: Callable[..., AlertmanagerPusher]
) -> None:
    slow_recorder = Recorder()
    try:
        make_pusher([slow_recorder.url], resend_interval_s=3600, watchdog=True)
        make_pusher([recorder.url], resend_interval_s=0.2, watchdog=True)
        wait_for(lambda: len(recorder.snapshot()) >= 5, 10, "five rounds of the fast pusher")
        # Over the same time the hourly one sent only its first round.
        assert len(slow_recorder.snapshot()) == 1
        for body in recorder.snapshot():
            [watchdog] = body
            assert watchdog["labels"] == watchdog_labels("gpu-node-01")
            confirmed = parse_rfc3339_ms(watchdog["annotations"]["last_confirmed"])
            assert parse_rfc3339_ms(watchdog["endsAt"]) == confirmed + 800  # 4 x 0.2 s
    finally:
        slow_recorder.close()


def test_start_up_resolves_what_an_earlier_run_left_firing(
    alertmanager: Alertmanager, make_pusher: Callable[..., AlertmanagerPusher]
) -> None:
    """A critical that cleared while the daemon was down must not stay firing for a day."""
    critical = gpu_alert(key="crit", severity=Severity.CRITICAL)
    critical_labels = {**EXPECTED_LABELS, "severity": "critical"}
    first = make_pusher([alertmanager.url])
    first.publish([critical, gpu_alert(key="still", gpu_index=6)])
    other_node = make_pusher([alertmanager.url], node_labels={"node": "gpu-node-02"})
    other_node.publish([critical])
    # A run before that, with other [alertmanager] labels (rack moved since).
    older = make_pusher([alertmanager.url], node_labels={**NODE, "rack": "r9"})
    older.publish([critical])
    older_labels = {**critical_labels, "rack": "r9"}
    wait_for(lambda: active_in(alertmanager, critical_labels), 10, "the first run's critical")
    wait_for(lambda: active_in(alertmanager, older_labels), 10, "the older run's critical")
    first.stop()
    older.stop()

    still_labels = {**EXPECTED_LABELS, "gpu": "6"}
    second = make_pusher([alertmanager.url], watchdog=True)
    second.publish([gpu_alert(key="still", gpu_index=6)])  # what the engine reloaded
    wait_for(lambda: not active_in(alertmanager, critical_labels), 10, "the leftover resolved")
    wait_for(lambda: alertmanager.notified("resolved", critical_labels), 10, "and notified so")
    wait_for(lambda: not active_in(alertmanager, older_labels), 10, "the older one resolved")
    assert active_in(alertmanager, still_labels), "an alert that still fires stays"
    assert active_in(alertmanager, {**critical_labels, "node": "gpu-node-02"}), "not ours"


# --- the daemon ------------------------------------------------------------------------------


def test_daemon_pushes_config_labels_watchdog_and_a_held_critical(
    alertmanager: Alertmanager, start_daemon: DaemonFactory, tmp_path: Path
) -> None:
    scenario = Scenario((ScenarioEvent(0.3, 1, "lost"),))
    settings = AlertmanagerSettings(urls=(alertmanager.url,), labels=SITE_LABELS)
    started_ms = int(time.time() * 1000)
    state = tmp_path / "state"
    daemon = start_daemon(
        backend=SimulatedBackend(gpu_count=2, scenario=scenario, step_s=0.1),
        hostname="gpu-node-09", alertmanager=settings, state_dir=state,
    )  # fmt: skip
    wait_for(lambda: daemon.sampler.status.ok)
    heartbeat = watchdog_labels("gpu-node-09", **SITE_LABELS)
    wait_for(lambda: active_in(alertmanager, heartbeat), 10, "the watchdog")
    uuid = daemon.sampler.status.facts.gpus[1].uuid
    lost = {"node": "gpu-node-09", **SITE_LABELS, "alertname": "gpu_lost", "severity": "critical",
            "gpu": "1", "UUID": uuid}  # fmt: skip
    wait_for(lambda: active_in(alertmanager, lost), 10, "the lost GPU, with the site's labels")
    assert parse_rfc3339_ms(alertmanager.alert(lost)["endsAt"]) >= started_ms + DAY_MS

    daemon.stop(grace_s=0.5)
    # A clean stop ends the watchdog at once; the critical stays, held.
    wait_for(lambda: not active_in(alertmanager, heartbeat), 10, "the watchdog ended")
    assert active_in(alertmanager, lost)

    # The next run re-sends the alert it reloaded from its journal (in the restart grace).
    restarted_ms = int(time.time() * 1000)
    start_daemon(
        backend=SimulatedBackend(gpu_count=2, step_s=0.1), hostname="gpu-node-09",
        alertmanager=replace(settings, watchdog=False), state_dir=state,
    )  # fmt: skip

    def reconfirmed() -> bool:
        alert = alertmanager.alert(lost)
        return alert is not None and (
            parse_rfc3339_ms(alert["annotations"]["last_confirmed"]) >= restarted_ms
        )

    wait_for(reconfirmed, 10, "the reloaded critical re-sent by the new run")
    assert active_in(alertmanager, lost)
