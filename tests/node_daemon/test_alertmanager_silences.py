"""The daemon's silences mirrored into a real Alertmanager's own (API v2), by tag.

The source of silences is made by hand here; node_daemon.alerts.silences builds
the daemon's real ones. What is checked is what on-call sees: Alertmanager's
silences, its alerts' state, and the notifications its webhook receiver gets.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import pytest

from node_daemon.alerts.alertmanager import AlertmanagerPusher
from node_daemon.alerts.am_silences import (
    AmMatcher,
    AmSilence,
    parse_rfc3339_ms,
    plan_silences,
    rfc3339_ms,
    silence_tag,
    tagged_key,
)
from tests.conftest import wait_for
from tests.node_daemon.alertmanager_harness import (
    EXPECTED_LABELS,
    Alertmanager,
    AlertmanagerProcess,
    active_in,
    gpu_alert,
)

Json = Any
HOUR_MS = 3_600_000
TAG_NODE = "gpu-node-01"


class Source:
    """A hand-made silence source, changed by the test (the pusher reads it on its thread)."""

    def __init__(self, *silences: AmSilence) -> None:
        self._lock = threading.Lock()
        self._silences = list(silences)

    def set(self, *silences: AmSilence) -> None:
        with self._lock:
            self._silences = list(silences)

    def __call__(self) -> Sequence[AmSilence]:
        with self._lock:
            return list(self._silences)


def silence(key: str, *matchers: AmMatcher, hours: float = 1.0, **changes: Any) -> AmSilence:
    now_ms = int(time.time() * 1000)
    made = AmSilence(
        key=key, matchers=matchers, starts_unix_ms=now_ms,
        ends_unix_ms=now_ms + int(hours * HOUR_MS), created_by="alice",
        comment=f"maintenance {key}",
    )  # fmt: skip
    return replace(made, **changes)


def ours(am: Alertmanager, key: str, state: str = "active") -> list[Json]:
    return [
        s for s in am.silences()
        if tagged_key(s["comment"], TAG_NODE) == key and s["status"]["state"] == state
    ]  # fmt: skip


def one_active(am: Alertmanager, key: str) -> Callable[[], bool]:
    return lambda: len(ours(am, key)) == 1


def post_silence(am: Alertmanager, comment: str, created_by: str = "bob") -> str:
    now_ms = int(time.time() * 1000)
    body = {
        "matchers": [{"name": "alertname", "value": "other", "isRegex": False, "isEqual": True}],
        "startsAt": rfc3339_ms(now_ms), "endsAt": rfc3339_ms(now_ms + HOUR_MS),
        "createdBy": created_by, "comment": comment,
    }  # fmt: skip
    request = urllib.request.Request(
        f"{am.url}/api/v2/silences", data=json.dumps(body).encode(), method="POST",
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=5) as response:
        return str(json.loads(response.read())["silenceID"])


def state_of(am: Alertmanager, silence_id: str) -> str:
    return str(next(s for s in am.silences() if s["id"] == silence_id)["status"]["state"])


def test_silences_are_created_changed_expired_and_survive_a_restart(
    alertmanager: Alertmanager, make_pusher: Callable[..., AlertmanagerPusher]
) -> None:
    hand_made = post_silence(alertmanager, "by hand")
    other_node = post_silence(alertmanager, f"theirs{silence_tag('gpu-node-02', 's-1')}")
    temp = silence("s-1", AmMatcher("alertname", "gpu_temp"))
    pair = silence("s-2", AmMatcher("gpu", "4|5", is_regex=True))
    source = Source(temp, pair)
    pusher = make_pusher([alertmanager.url])
    pusher.set_silence_source(source)

    wait_for(one_active(alertmanager, "s-1"), 10, "s-1 mirrored")
    wait_for(one_active(alertmanager, "s-2"), 10, "s-2 mirrored")
    [mirrored] = ours(alertmanager, "s-1")
    # The node's own label is added: a node silences only its own alerts.
    assert {(m["name"], m["value"], m["isRegex"]) for m in mirrored["matchers"]} == {
        ("alertname", "gpu_temp", False), ("node", "gpu-node-01", False),
    }  # fmt: skip
    assert mirrored["createdBy"] == "alice"
    assert mirrored["comment"] == "maintenance s-1 [gpufleet node=gpu-node-01 id=s-1]"
    assert parse_rfc3339_ms(mirrored["endsAt"]) == temp.ends_unix_ms
    [regex] = ours(alertmanager, "s-2")
    assert {"name": "gpu", "value": "4|5", "isRegex": True, "isEqual": True} in regex["matchers"]

    # A new end: a new silence, the old one expired (never both live for long, never none).
    longer = replace(temp, ends_unix_ms=temp.ends_unix_ms + HOUR_MS)
    source.set(longer, pair)
    pusher.silences_changed()

    def extended() -> bool:
        live = ours(alertmanager, "s-1")
        return len(live) == 1 and parse_rfc3339_ms(live[0]["endsAt"]) == longer.ends_unix_ms

    wait_for(extended, 10, "s-1's new end in Alertmanager")
    assert [s["id"] for s in ours(alertmanager, "s-1", "expired")] == [mirrored["id"]]

    # Gone from the daemon: expired in Alertmanager.
    source.set(longer)
    pusher.silences_changed()
    wait_for(lambda: not ours(alertmanager, "s-2"), 10, "s-2 expired")
    assert [s["id"] for s in ours(alertmanager, "s-2", "expired")] == [regex["id"]]
    [kept] = ours(alertmanager, "s-1")

    # A restarted daemon finds its silences by their tag: nothing duplicated, nothing churned.
    pusher.stop()
    again = make_pusher([alertmanager.url])
    again.set_silence_source(source)
    wait_for(lambda: again.url_stats()[alertmanager.url].silence_syncs >= 1, 10, "first sync")
    assert [s["id"] for s in ours(alertmanager, "s-1")] == [kept["id"]]
    assert state_of(alertmanager, hand_made) == "active", "someone else's silence is left alone"
    assert state_of(alertmanager, other_node) == "active", "another node's silence too"


def test_silenced_alert_is_suppressed_and_reaches_no_receiver(
    alertmanager: Alertmanager, make_pusher: Callable[..., AlertmanagerPusher]
) -> None:
    gpu3 = silence("s-9", AmMatcher("alertname", "gpu_temp"), AmMatcher("gpu", "3"))
    source = Source(gpu3)
    pusher = make_pusher([alertmanager.url])
    pusher.set_silence_source(source)
    wait_for(one_active(alertmanager, "s-9"), 10, "the silence mirrored")
    [mirrored] = ours(alertmanager, "s-9")

    pusher.publish([gpu_alert()])  # GPU 3: silenced
    wait_for(lambda: alertmanager.alert(EXPECTED_LABELS) is not None, 10, "GPU 3's alert held")
    held = alertmanager.alert(EXPECTED_LABELS)
    assert held["status"]["state"] == "suppressed"
    assert held["status"]["silencedBy"] == [mirrored["id"]]

    gpu4 = {**EXPECTED_LABELS, "gpu": "4"}
    pusher.publish([gpu_alert(key="gpu4", gpu_index=4)])  # not silenced: pages
    wait_for(lambda: alertmanager.notified("firing", gpu4), 10, "GPU 4's page")
    assert not alertmanager.notified("firing", EXPECTED_LABELS), "GPU 3 was silenced"

    # The daemon's silence ends early: Alertmanager's goes too, and GPU 3 pages.
    source.set()
    pusher.silences_changed()
    wait_for(lambda: active_in(alertmanager, EXPECTED_LABELS), 10, "GPU 3's alert active")
    wait_for(lambda: alertmanager.notified("firing", EXPECTED_LABELS), 10, "GPU 3's page")


def test_an_unreachable_alertmanager_is_logged_once_and_caught_up(
    am_process: Callable[..., AlertmanagerProcess],
    make_pusher: Callable[..., AlertmanagerPusher],
    caplog: pytest.LogCaptureFixture,
) -> None:
    process = am_process()  # its port is known, nothing listens yet
    with caplog.at_level(logging.WARNING, logger="node_daemon.alerts.alertmanager"):
        pusher = make_pusher([process.url], resend_interval_s=0.1)
        pusher.set_silence_source(Source(silence("s-3", AmMatcher("alertname", "gpu_temp"))))
        wait_for(lambda: pusher.url_stats()[process.url].silence_failures >= 3, 10, "retries")
        am = process.start()
        wait_for(one_active(am, "s-3"), 20, "the silence once Alertmanager is up")
    messages = [r.getMessage() for r in caplog.records]
    assert len([m for m in messages if "silences not in step" in m]) == 1, messages
    assert len([m for m in messages if "silences in step again" in m]) == 1, messages


# --- the plan alone ------------------------------------------------------------------------


def found(key: str, node: str = TAG_NODE, state: str = "active", **fields: Any) -> Json:
    return {"id": f"id-{key}-{state}", "comment": f"c{silence_tag(node, key)}",
            "status": {"state": state}, "matchers": [], "startsAt": "2020-01-01T00:00:00Z",
            "endsAt": "2020-01-01T01:00:00Z", **fields}  # fmt: skip


def test_plan_leaves_others_alone_and_expires_duplicates_and_leftovers() -> None:
    now_ms = int(time.time() * 1000)
    wanted = silence("s-1", AmMatcher("alertname", "gpu_temp"))
    body = {
        "matchers": [
            {"name": "alertname", "value": "gpu_temp", "isRegex": False, "isEqual": True},
            {"name": "node", "value": TAG_NODE, "isRegex": False, "isEqual": True},
        ],
        "endsAt": rfc3339_ms(wanted.ends_unix_ms), "startsAt": rfc3339_ms(now_ms),
    }  # fmt: skip
    existing = [
        found("s-1", **body),
        {**found("s-1", **body), "id": "duplicate"},
        found("s-5"),  # no longer wanted
        found("s-6", state="expired"),  # history
        found("s-1", node="gpu-node-02"),  # another node's
        {"id": "manual", "comment": "by hand", "status": {"state": "active"}},
    ]
    plan = plan_silences([wanted], existing, TAG_NODE, now_ms)
    assert plan.create == ()
    assert plan.expire == ("duplicate", "id-s-5-active")


def test_plan_skips_a_silence_already_over_and_keeps_a_future_start() -> None:
    now_ms = int(time.time() * 1000)
    over = silence("s-1", AmMatcher("alertname", "x"), ends_unix_ms=now_ms - 1)
    later = silence("s-2", AmMatcher("alertname", "x"), starts_unix_ms=now_ms + HOUR_MS,
                    ends_unix_ms=now_ms + 2 * HOUR_MS)  # fmt: skip
    plan = plan_silences([over, later], [found("s-1")], TAG_NODE, now_ms)
    assert plan.expire == ("id-s-1-active",)
    [created] = plan.create
    assert created["startsAt"] == rfc3339_ms(now_ms + HOUR_MS)
    assert tagged_key(str(created["comment"]), TAG_NODE) == "s-2"
    assert tagged_key(str(created["comment"]), "gpu-node-011") is None
