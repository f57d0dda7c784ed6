"""`gpufleet status --at TIME` and `gpufleet alerts --at TIME` (#30) end to end.

A real daemon heats a GPU to a critical alert; the commands run as real processes and
what they print is held against the node's own GetStateAt at the same moment.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.backends.simulated import SimulatedBackend
from node_daemon.backends.simulated.scenario import Scenario
from node_daemon.history.settings import HistorySettings
from tests.conftest import DaemonFactory, wait_for
from tests.console.test_terminal import gpufleet, home  # noqa: F401
from tests.node_daemon.test_state_at import HEAT, a_moment, critical_alert, now_ms, state_at


@dataclass
class HotNode:
    address: str
    node: pb_grpc.NodeServiceStub
    before: int  # a moment before the alert
    hot: int  # a moment while it fires
    alert_id: str


@contextmanager
def firing_critical(
    start_daemon: DaemonFactory, scenario: Scenario
) -> Iterator[tuple[str, pb_grpc.NodeServiceStub, int]]:
    """Node "gpu-hot" heating its GPU 1 by `scenario`, once the critical alert fires: its
    address, a stub on it, and a moment while the alert fires."""
    backend = SimulatedBackend(gpu_count=2, scenario=scenario, step_s=5.0)
    daemon = start_daemon(backend=backend, hostname="gpu-hot",
                          history=HistorySettings(flush_interval_s=0.5))  # fmt: skip
    with grpc.insecure_channel(str(daemon.address)) as channel:
        node = pb_grpc.NodeServiceStub(channel)
        wait_for(lambda: critical_alert(node), 30, "GPU 1's critical temperature alert")
        yield str(daemon.address), node, a_moment()


@pytest.fixture
def hot(start_daemon: DaemonFactory) -> Iterator[HotNode]:
    with firing_critical(start_daemon, HEAT) as (address, node, hot):
        alert = critical_alert(node)
        assert alert is not None
        before = alert.started_unix_ms - 1  # sampled since the start, not yet critical
        yield HotNode(address, node, before, hot, alert.id)


def local_iso(at_ms: int) -> str:
    """The moment as ISO 8601 with no zone: local time, to the millisecond."""
    return dt.datetime.fromtimestamp(at_ms / 1000).isoformat(timespec="milliseconds")


def test_status_at_a_moment_lists_each_gpu_s_readings_as_the_node_recorded_them(
    home: Path,  # noqa: F811
    hot: HotNode,
) -> None:
    code, out, err = gpufleet(home, "status", "--node", hot.address, "--at", local_iso(hot.hot),
                              "--json")  # fmt: skip
    assert code == 1, err  # a critical alert fired at that moment
    printed = json.loads(out)
    assert printed["at_unix_ms"] == hot.hot
    (row,) = printed["nodes"]
    answer = state_at(hot.node, hot.hot)
    assert (row["node"], row["tier"], row["step_ms"]) == ("gpu-hot", "raw", 100)
    assert row["alerts"]["critical"] >= 1 and row["history_reaches"]
    assert [r["gpu"] for r in row["readings"]] == [0, 1]
    for shown, gpu in zip(row["readings"], answer.gpus, strict=True):
        assert shown["temp_gpu_c"] == pytest.approx(gpu.sample.temp_gpu_c)
        assert shown["sample_unix_ms"] == gpu.sample_unix_ms <= hot.hot
    assert row["readings"][1]["temp_gpu_c"] >= 85.0
    assert row["hottest_gpu"] == 1

    utc = dt.datetime.fromtimestamp(hot.before / 1000, dt.UTC).isoformat(timespec="milliseconds")
    code, out, _ = gpufleet(home, "status", "--node", hot.address, "--at", utc)
    assert code == 0  # nothing critical fired yet then
    lines = out.splitlines()
    assert lines[0].startswith("At ") and "raw (0.1 s)" in lines[2]
    assert any(line.split()[:2] == ["gpu-hot", "1"] and "°C" in line for line in lines[3:])


def test_relative_moments_and_alerts_at_a_moment(home: Path, hot: HotNode) -> None:  # noqa: F811
    asked = now_ms()
    code, out, _ = gpufleet(home, "status", "--node", hot.address, "--at", "-1s", "--json")
    assert code in (0, 1)  # whether the alert fired a second before the command ran
    printed = json.loads(out)
    assert asked - 1000 <= printed["at_unix_ms"] <= now_ms() - 1000
    assert all(r["temp_gpu_c"] is not None for r in printed["nodes"][0]["readings"])
    code, out, _ = gpufleet(home, "alerts", "--node", hot.address, "--at=-2h", "--json")
    assert (code, json.loads(out)["alerts"]) == (0, [])  # before the daemon started

    code, out, _ = gpufleet(home, "alerts", "--node", hot.address, "--at", local_iso(hot.hot),
                            "--json")  # fmt: skip
    assert code == 0
    firing = {a["id"]: a for a in json.loads(out)["alerts"]}
    assert firing[hot.alert_id]["severity"] == "critical"
    assert firing[hot.alert_id]["at_unix_ms"] == hot.hot
    assert set(firing) == {a.id for a in state_at(hot.node, hot.hot).alerts}
    code, out, _ = gpufleet(home, "alerts", "--node", hot.address, "--at", local_iso(hot.before))
    assert code == 0 and hot.alert_id not in out and out.startswith("Firing at ")


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["status", "--at", "yesterday"], "-2h"),
        (["alerts", "--at", "2026-13-01T00:00"], "ISO 8601"),
        (["status", "--at", "-2x"], "relative to now"),
        (["status", "--at", "2999-01-01T00:00"], "in the future"),
        (["alerts", "--all", "--at", "-1h"], "--all and --at"),
    ],
)
def test_a_bad_time_is_a_usage_error_naming_the_forms(
    home: Path,  # noqa: F811
    argv: list[str],
    words: str,
) -> None:
    started = time.monotonic()
    code, out, err = gpufleet(home, *argv, "--node", "127.0.0.1:9")
    assert (code, out) == (2, "") and words in err, err
    assert time.monotonic() - started < 30  # refused before any node is called
