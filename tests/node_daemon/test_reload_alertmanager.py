"""AlertmanagerPusher.reconfigure (a reload): what fires keeps firing, at the new URLs at once;
new node labels resolve the old label set; a real Alertmanager sees no gap."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable

from node_daemon.alerts.alertmanager import AlertmanagerPusher
from tests.conftest import wait_for
from tests.node_daemon import alertmanager_harness as harness
from tests.node_daemon.alertmanager_harness import (
    EXPECTED_LABELS,
    NODE,
    Alertmanager,
    Recorder,
    alerts_of,
    gpu_alert,
    received,
    settings,
)

MakePusher = Callable[..., AlertmanagerPusher]


def test_new_labels_resolve_the_old_label_set_and_fire_the_new_one(
    make_pusher: MakePusher, recorder: Recorder
) -> None:
    pusher = make_pusher([recorder.url], resend_interval_s=3600)
    pusher.publish([gpu_alert()])
    wait_for(received(recorder, EXPECTED_LABELS), 10, "the alert under the first labels")

    labels = {**NODE, "rack": "r4"}
    pusher.reconfigure(settings([recorder.url], labels={"rack": "r4"}), labels)

    moved = {**EXPECTED_LABELS, "rack": "r4"}
    wait_for(received(recorder, moved), 10, "the alert under the new labels, without a resend")
    body = next(b for b in recorder.snapshot() if alerts_of(b, moved))
    (old,), (new,) = alerts_of(body, EXPECTED_LABELS), alerts_of(body, moved)
    assert unix_s(old["endsAt"]) <= time.time()  # resolved: ended already
    # Firing, 4 resends ahead by the new resend interval (30 s), no longer the old (3600 s).
    assert time.time() + 60 < unix_s(new["endsAt"]) < time.time() + 3600


def unix_s(rfc3339: str) -> float:
    return dt.datetime.fromisoformat(rfc3339).timestamp()


def test_a_real_alertmanager_keeps_the_alert_active_across_a_move_of_urls(
    make_pusher: MakePusher, recorder: Recorder, alertmanager: Alertmanager
) -> None:
    """From a URL that answers nothing useful to a real Alertmanager: the firing alert is
    there at once, active, with nothing re-announced by the engine."""
    pusher = make_pusher([recorder.url], resend_interval_s=3600)
    pusher.publish([gpu_alert()])
    wait_for(received(recorder, EXPECTED_LABELS), 10, "the alert at the recorder")

    pusher.reconfigure(settings([alertmanager.url], resend_interval_s=3600), NODE)

    wait_for(lambda: harness.active_in(alertmanager, EXPECTED_LABELS), 15, "active there")
    assert pusher.url_stats().keys() == {alertmanager.url}
