"""AlertmanagerPusher against a real Alertmanager (Debian's prometheus-alertmanager).

Each Alertmanager test starts its own Alertmanager on loopback whose only
receiver is a webhook served by the test, so what reaches the pager is what the
test sees. Tests of timing details point the pusher at a recording HTTP server.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from gpufleet.v1.alert_severity import Severity
from node_daemon.alerts.alertmanager import THREAD_NAME, AlertmanagerPusher
from node_daemon.backends.simulated import SimulatedBackend
from node_daemon.backends.simulated.scenario import Scenario, ScenarioEvent
from node_daemon.errors import ConfigError
from tests.conftest import DaemonFactory, wait_for
from tests.node_daemon.alertmanager_harness import (
    EXPECTED_LABELS,
    FIXED_NOW_S,
    NODE,
    Alertmanager,
    Recorder,
    active_in,
    alerts_of,
    cleared,
    gpu_alert,
    received,
    settings,
)
from tests.tools import free_port

Json = Any
FIXED_NOW = "2023-11-14T22:13:20.000Z"


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
    pusher = AlertmanagerPusher(
        settings([closed, alertmanager.url], resend_interval_s=0.2, timeout_s=2.0), NODE
    )
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


def test_firing_alert_is_resent_with_a_moving_end(
    recorder: Recorder, make_pusher: Callable[..., AlertmanagerPusher]
) -> None:
    now = [FIXED_NOW_S]
    pusher = make_pusher([recorder.url], resend_interval_s=0.3, clock=lambda: now[0])
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
                "last_confirmed": FIXED_NOW,
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
    pusher = make_pusher([recorder.url], resend_interval_s=0.2, clock=lambda: FIXED_NOW_S)
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
    assert new["endsAt"] == "2023-11-15T22:13:20.000Z"  # a firing critical: now + 1 day held
    assert new["startsAt"] == old["startsAt"]


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
        AlertmanagerPusher(settings(["http://127.0.0.1:9093"]), {**NODE, "severity": "x"})
    with pytest.raises(ValueError, match="invalid"):
        AlertmanagerPusher(settings(["http://127.0.0.1:9093"]), {**NODE, "node-name": "x"})
    with pytest.raises(ValueError, match="include 'node'"):
        AlertmanagerPusher(settings(["http://127.0.0.1:9093"]), {"site": "x"})
    with pytest.raises(ConfigError, match="http"):
        AlertmanagerPusher(settings(["127.0.0.1:9093"]), NODE)


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
