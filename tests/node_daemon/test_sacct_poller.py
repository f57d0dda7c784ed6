"""The sacct poller against a sacct-shaped program: a real executable that answers with
recorded `sacct -P` output and keeps the arguments it was called with.

The real sacct needs slurmdbd; tests/slurm/test_sacct_accounting.py runs the poller
against it where the harness can start one (MariaDB and slurmdbd installed).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.usage.poller import FIRST_LOOKBACK_S, SacctPoller
from node_daemon.usage.settings import UsageSettings
from node_daemon.usage.store import UsageStore
from tests.conftest import DaemonFactory, wait_for
from tests.node_daemon.usage_fixtures import empty_usage_store  # noqa: F401 (the `store` fixture)

SAMPLES = Path(__file__).parent / "sacct"
NOW = dt.datetime(2024, 6, 2, 12, 30, tzinfo=dt.UTC).timestamp()


class FakeSacct:
    """An executable `sacct`: prints `answer` (a file), exits `code`, logs its argv."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.path, self.answer, self.calls = root / "sacct", root / "answer", root / "calls"
        self.path.write_text(
            "#!/bin/sh\n"
            f'printf "%s\\n" "$*" >> "{self.calls}"\n'
            f'cat "{self.answer}"\n'
            f'exit "$(cat "{root}/code" 2>/dev/null || echo 0)"\n',
            encoding="utf-8",
        )
        self.path.chmod(self.path.stat().st_mode | stat.S_IXUSR)
        self.root = root

    def answers(self, sample: str, code: int = 0) -> None:
        self.answer.write_text((SAMPLES / sample).read_text(encoding="utf-8"), encoding="utf-8")
        (self.root / "code").write_text(str(code), encoding="utf-8")

    def argv(self) -> list[list[str]]:
        if not self.calls.exists():
            return []
        return [line.split(" ") for line in self.calls.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """sacct speaks local time: the recorded answers are read as this zone's."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def sacct(tmp_path: Path) -> FakeSacct:
    return FakeSacct(tmp_path / "bin")


def jobs_by_id(store: UsageStore) -> dict[str, tuple[float, float | None, float]]:
    return {j.job_id: (j.gpus, j.end_unix, j.billed_end_unix) for j in store.jobs(None, 2e9)}


def test_a_poll_stores_this_nodes_share_and_running_jobs(
    store: UsageStore, sacct: FakeSacct
) -> None:
    sacct.answers("header_slurm23.txt")
    poller = SacctPoller(store, 300, "gpu01.example.org", str(sacct.path), clock=lambda: NOW)
    assert poller.poll() == (5, 0)
    [argv] = sacct.argv()
    assert "--nodelist=gpu01" in argv and "--allocations" in argv and "--allusers" in argv
    since = dt.datetime.fromtimestamp(NOW - FIRST_LOOKBACK_S).strftime("%Y-%m-%dT%H:%M:%S")
    assert f"--starttime={since}" in argv
    jobs = jobs_by_id(store)
    assert jobs["4720"][0] == 8  # 16 GPUs over two nodes: this node's half
    # 4714 still runs: billed up to this poll, its end unknown.
    assert jobs["4714"][1] is None and jobs["4714"][2] == NOW


def test_the_next_poll_replaces_jobs_seen_before(store: UsageStore, sacct: FakeSacct) -> None:
    now = [NOW]
    poller = SacctPoller(store, 300, "gpu01", str(sacct.path), clock=lambda: now[0])
    sacct.answers("header_slurm23.txt")
    poller.poll()
    now[0] += 300
    sacct.answers("header_reordered.txt")
    assert poller.poll() == (1, 3)  # 4730 is new; 4712, 4714, 4715_3 seen before
    second = sacct.argv()[1]
    # From one interval before the previous poll's end: late records are not missed.
    start = dt.datetime.fromtimestamp(NOW - 300).strftime("%Y-%m-%dT%H:%M:%S")
    assert f"--starttime={start}" in second
    jobs = jobs_by_id(store)
    assert jobs["4714"][1] == dt.datetime(2024, 6, 2, 12, tzinfo=dt.UTC).timestamp()
    assert len(store.jobs(None, 2e9)) == 6


def test_a_restarted_poller_carries_on_where_it_stopped(
    store: UsageStore, sacct: FakeSacct
) -> None:
    sacct.answers("header_slurm23.txt")
    SacctPoller(store, 300, "gpu01", str(sacct.path), clock=lambda: NOW).poll()
    again = SacctPoller(store, 300, "gpu01", str(sacct.path), clock=lambda: NOW + 3600)
    assert again.window(NOW + 3600) == (NOW - 300, NOW + 3600)


def test_a_failing_sacct_is_said_once_and_stores_nothing(
    store: UsageStore, sacct: FakeSacct, caplog: pytest.LogCaptureFixture
) -> None:
    sacct.answers("header_slurm23.txt", code=1)
    poller = SacctPoller(store, 300, "gpu01", str(sacct.path), clock=lambda: NOW)
    with caplog.at_level(logging.INFO, "node_daemon.usage.poller"):
        assert poller.poll() is None
        assert poller.poll() is None
        # Never answered: a node without accounting, said once at info, not a warning.
        said = [(r.levelno, r.getMessage()) for r in caplog.records]
        assert len(said) == 1 and said[0][0] == logging.INFO and "sacct exited 1" in said[0][1]
        assert store.jobs(None, 2e9) == []
        sacct.answers("header_slurm23.txt")
        assert poller.poll() == (5, 0)
        assert "sacct answers again" in caplog.records[-1].getMessage()
        sacct.answers("header_slurm23.txt", code=1)  # slurmdbd went away: now a warning
        assert poller.poll() is None
        assert poller.poll() is None
        failures = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(failures) == 1 and "sacct exited 1" in failures[0].getMessage()


def test_output_sacct_cannot_have_made_is_said_not_stored(
    store: UsageStore, sacct: FakeSacct, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("JobID|User|Start|End|AllocTRES\n1|a|soon|later|gres/gpu=1\n")
    sacct.answer.write_text(bad.read_text())
    poller = SacctPoller(store, 300, "gpu01", str(sacct.path), clock=lambda: NOW)
    with caplog.at_level(logging.INFO, "node_daemon.usage.poller"):
        assert poller.poll() is None
    assert "sacct line 2, column Start: 'soon'" in caplog.text
    assert store.meta("sacct_polled_until") is None  # the window is asked again next time


def test_a_daemon_keeps_usage_by_account_current(
    start_daemon: DaemonFactory, sacct: FakeSacct, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon's own poller (its thread, sacct found on PATH) feeds QueryUsage."""
    sacct.answers("header_reordered.txt")  # ended jobs only: the bill does not grow
    monkeypatch.setenv("PATH", f"{sacct.root}{os.pathsep}{os.environ['PATH']}")
    daemon = start_daemon(gpus=2, model="h100", hostname="gpu01",
                          usage=UsageSettings(sacct_poll_interval_s=30))  # fmt: skip
    request = pb.QueryUsageRequest(from_day="2024-06-01", to_day="2024-06-30",
                                   group_by=pb.USAGE_GROUPING_ACCOUNT)  # fmt: skip

    def accounts() -> dict[str, float]:
        with grpc.insecure_channel(str(daemon.address)) as channel:
            answer = pb_grpc.NodeServiceStub(channel).QueryUsage(request, timeout=5)
        return {row.key: row.gpu_seconds for row in answer.rows}

    wait_for(lambda: "ml" in accounts(), what="the polled jobs in QueryUsage")
    assert accounts() == pytest.approx({"ml": 4 * 3600 + 900, "vision": 1800 + 2 * 3600})
