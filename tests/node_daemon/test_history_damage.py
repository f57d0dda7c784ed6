"""A damaged history file and a stepped clock against a real daemon process (issue #28).

The history a daemon finds at start is written first through the real store (the
store takes its times from the sweeps), then damaged with sqlite3 as a bad disk or
another program would: the daemon must start on it, again and again, and serve the
rest, its journal and its audit.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.backends.readings import GpuReading
from node_daemon.history.settings import HistorySettings
from node_daemon.history.store import HISTORY_FILE, HistoryStore
from tests.conftest import DaemonFactory, wait_for
from tests.daemon_process import DaemonProcess
from tests.node_daemon.streams import first_of
from tests.node_daemon.test_full_disk import free_port
from tests.node_daemon.test_history_rpc import (
    daemon,
    history,
    metrics_page,
    now_ms,
    seed,
    wait_for_a_tick,
)
from tests.node_daemon.test_history_store import BootClock

DAY_MS = 86_400_000
NOT_DEFLATE = b"\x00\x01 not deflate data \xff" * 4


def damage(state: Path, rows: list[tuple[int, int]]) -> None:
    """Overwrite the `mean` blob of these (tier, ts_ms) rows with bytes that do not decode."""
    with sqlite3.connect(state / HISTORY_FILE) as db:
        for tier, ts_ms in rows:
            changed = db.execute("UPDATE points SET mean = ? WHERE tier = ? AND ts_ms = ?",
                                 (NOT_DEFLATE, tier, ts_ms)).rowcount  # fmt: skip
            assert changed == 1, (tier, ts_ms)


def started_events(address: str, runs: int) -> list[str]:
    """The summaries of the journal's first `runs` daemon-started events (one a run)."""
    with grpc.insecure_channel(address) as channel:
        stub = pb_grpc.NodeServiceStub(channel)
        stream = stub.StreamEvents(pb.StreamEventsRequest(after_seq=0), timeout=15)
        return first_of(stream, runs, started_summary, "journal's stream")


def started_summary(event: pb.Event) -> str | None:
    return event.summary if event.kind == pb.EVENT_KIND_DAEMON_STARTED else None


def record_drain(address: str) -> None:
    """One audit record, as Slurm's hook writes it."""
    request = pb.RecordExternalActionRequest(system="slurm", action="drain",
                                             target="node=gpu01", result="OK")  # fmt: skip
    with grpc.insecure_channel(address) as channel:
        pb_grpc.NodeServiceStub(channel).RecordExternalAction(request, timeout=5)


def audit(address: str) -> list[pb.AuditRecord]:
    with grpc.insecure_channel(address) as channel:
        stub = pb_grpc.NodeServiceStub(channel)
        return list(stub.QueryAudit(pb.QueryAuditRequest(), timeout=5).records)


@pytest.fixture
def metrics_port() -> int:
    return free_port()


@pytest.fixture
def node(tmp_path: Path, metrics_port: int) -> Iterator[DaemonProcess]:
    """A daemon process on tmp_path/state (not started), stopped after the test."""
    process = daemon(tmp_path, "--metrics-listen", f"127.0.0.1:{metrics_port}")
    yield process
    process.stop()


def test_damaged_rows_are_skipped_the_rest_served_and_the_daemon_starts_again(
    tmp_path: Path, node: DaemonProcess, metrics_port: int
) -> None:
    end = now_ms() // 60_000 * 60_000
    start = end - 10 * 60_000
    state = tmp_path / "state"
    seed(state, start, end, 1000, lambda at_ms: 50.0)
    # The last raw tick (a restart folds it again), one in the middle, one 10 s step.
    bad_raw = [end - 1000, start + 300_000]
    damage(state, [(0, bad_raw[0]), (0, bad_raw[1]), (1, start + 120_000)])
    node.start()
    first_run = now_ms()
    wait_for_a_tick(node.address, end)  # its sweep closes the seed's last 10 s step
    raw = history(node.address, start_unix_ms=start, end_unix_ms=end - 1, metrics=["temp_gpu_c"],
                  gpu_indices=[0], max_points=20_000)  # fmt: skip
    steps = history(node.address, start_unix_ms=start, end_unix_ms=end - 1,
                    metrics=["temp_gpu_c"], gpu_indices=[0], max_points=100)  # fmt: skip
    with pytest.raises(grpc.RpcError) as lost:
        history(node.address, start_unix_ms=bad_raw[1], end_unix_ms=bad_raw[1])
    page = metrics_page(metrics_port)
    first_events = started_events(node.address, 1)
    record_drain(node.address)
    node.stop()
    node.start()  # and again: the damaged rows are still there
    wait_for_a_tick(node.address, first_run)
    again = history(node.address, start_unix_ms=start, end_unix_ms=end - 1,
                    metrics=["temp_gpu_c"], gpu_indices=[0], max_points=20_000)  # fmt: skip
    events, records = started_events(node.address, 2), audit(node.address)
    good = [t for t in range(start, end) if t % 1000 == 0 and t not in bad_raw]
    assert raw.tier == "raw" and list(raw.timestamps_unix_ms) == good
    assert set(raw.series[0].values) == {50.0}
    assert steps.tier == "10s" and start + 120_000 not in steps.timestamps_unix_ms
    assert len(steps.timestamps_unix_ms) == 59 and set(steps.series[0].values) == {50.0}
    assert lost.value.code() == grpc.StatusCode.DATA_LOSS
    assert "damaged and cannot be decoded" in (lost.value.details() or ""), lost.value.details()
    assert "not a deflated float32 array" in (lost.value.details() or "")
    assert "gpufleet_history_corrupt_rows 3.0" in page
    assert list(again.timestamps_unix_ms) == good  # the second start serves the same
    assert events[0] == first_events[0]  # the journal, across both runs
    assert [(r.method, r.target) for r in records] == [("slurm/drain", "node=gpu01")]


def test_a_history_file_that_is_no_database_is_set_aside_and_the_start_journals_it(
    tmp_path: Path, node: DaemonProcess
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / HISTORY_FILE).write_bytes(b"SQLite format 3\x00 torn header " * 300)
    node.start()
    started = now_ms()
    wait_for_a_tick(node.address, started)
    (summary,) = started_events(node.address, 1)
    (aside,) = state.glob(f"{HISTORY_FILE}.broken-*")
    assert aside.read_bytes().startswith(b"SQLite format 3\x00 torn header")
    assert f"metric history {state / HISTORY_FILE} could not be read" in summary, summary
    assert f"kept as {aside.name}, a new one begun" in summary


def test_a_restart_after_a_clock_step_records_on_and_keeps_what_came_before(
    tmp_path: Path, node: DaemonProcess
) -> None:
    state, boot = tmp_path / "state", BootClock(1000.0)
    end = now_ms() // 1000 * 1000
    before = list(range(end - 20 * 60_000, end, 1000))  # 20 minutes, up to now
    ahead = [end + 40 * DAY_MS + n * 1000 for n in range(4)]  # the clock 40 days ahead
    # The run before the restart, its clock stepped for 4 sweeps, then put back.
    store = HistoryStore(state / HISTORY_FILE, HistorySettings(), 1000, boot_clock=boot)
    for at_ms in [*before, *ahead, end]:
        store.append(at_ms, [GpuReading(index=g, temp_gpu_c=55.0) for g in range(2)])
        boot.seconds += 1
    store.close()
    node.start()
    wait_for_a_tick(node.address, end + 1)  # recording goes on at the corrected time
    kept = history(node.address, start_unix_ms=before[0], end_unix_ms=end,
                   metrics=["temp_gpu_c"], gpu_indices=[1], max_points=20_000)  # fmt: skip
    future = history(node.address, start_unix_ms=ahead[0], end_unix_ms=ahead[-1],
                     metrics=["temp_gpu_c"], gpu_indices=[1])  # fmt: skip
    assert list(kept.timestamps_unix_ms[: len(before)]) == before
    assert end in kept.timestamps_unix_ms and set(kept.series[0].values) == {55.0}
    assert list(future.timestamps_unix_ms) == ahead  # what the clock said is kept too


class SteppedClock:
    """The wall clock, and an offset the test steps it by, as an operator's `date -s` does."""

    def __init__(self) -> None:
        self.offset_s = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset_s


def test_a_daemon_whose_clock_steps_40_days_ahead_and_back_keeps_its_history_and_records_on(
    tmp_path: Path, start_daemon: DaemonFactory
) -> None:
    state, clock = tmp_path / "state", SteppedClock()
    end = now_ms() // 60_000 * 60_000
    before = list(range(end - 20 * 60_000, end, 1000))
    seed(state, before[0], end, 1000, lambda at_ms: 45.0)
    address = str(start_daemon(sweep_clock=clock, state_dir=state).address)
    wait_for_a_tick(address, end)
    clock.offset_s = 40 * DAY_MS / 1000
    ahead = now_ms() + 40 * DAY_MS

    def stamped_ahead() -> int:
        answer = history(address, start_unix_ms=ahead - 1000, end_unix_ms=ahead + 60_000,
                         metrics=["power_w"], gpu_indices=[0], max_points=20_000)  # fmt: skip
        return len(answer.timestamps_unix_ms)

    wait_for(lambda: stamped_ahead() >= 3, 15, "sweeps stamped 40 days ahead")
    clock.offset_s = 0.0
    back = now_ms()
    wait_for_a_tick(address, back)  # recording goes on at the corrected time
    raw = history(address, start_unix_ms=before[0], end_unix_ms=end - 1,
                  metrics=["temp_gpu_c"], gpu_indices=[0], max_points=20_000)  # fmt: skip
    steps = history(address, start_unix_ms=before[0], end_unix_ms=end - 1,
                    metrics=["temp_gpu_c"], gpu_indices=[0], max_points=200)  # fmt: skip
    assert list(raw.timestamps_unix_ms) == before
    assert steps.tier == "10s" and steps.timestamps_unix_ms[0] == before[0]
    assert len(steps.timestamps_unix_ms) == 120 and set(steps.series[0].values) == {45.0}
    assert stamped_ahead() >= 3  # what the clock said while it was wrong is kept too
