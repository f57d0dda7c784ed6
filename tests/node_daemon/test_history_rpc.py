"""QueryHistory and the inventory's history against a real daemon process over loopback gRPC.

The hours before the daemon's start are written into its state directory first,
through the real store with the ticks stamped in the past (the store takes its
times from the sweeps), so a day of history needs no day of waiting.
"""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import grpc
import pytest

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.alerts.rules import AlertSettings, ThresholdSettings
from node_daemon.backends.readings import GpuReading
from node_daemon.history.settings import HistorySettings
from node_daemon.history.store import HISTORY_FILE, HistoryStore
from node_daemon.rpc.threshold_lines import alert_thresholds
from tests.conftest import wait_for
from tests.daemon_process import DaemonProcess
from tests.node_daemon.streams import first_of
from tests.node_daemon.test_full_disk import SmallDisk, disk, free_port  # noqa: F401

HOUR_MS = 3_600_000
Temp = Callable[[int], float]  # (tick time, ms) → temp_gpu_c


def seed(state: Path, start_ms: int, end_ms: int, step_ms: int, temp: Temp) -> None:
    """Ticks of 2 GPUs from start_ms to end_ms, written as the daemon's writer would."""
    store = HistoryStore(state / HISTORY_FILE, HistorySettings(), raw_step_ms=1000)
    for n, at_ms in enumerate(range(start_ms, end_ms, step_ms)):
        store.append(at_ms, [GpuReading(index=g, temp_gpu_c=temp(at_ms)) for g in range(2)])
        if n % 50 == 49:
            store.flush()
    store.close()


def daemon(tmp_path: Path, *extra: str) -> DaemonProcess:
    return DaemonProcess(tmp_path, "--backend", "simulated", "--gpus", "2", *extra)


def history(address: str, **fields: object) -> pb.QueryHistoryResponse:
    with grpc.insecure_channel(address) as channel:
        request = pb.QueryHistoryRequest(**fields)  # type: ignore[arg-type]
        return pb_grpc.NodeServiceStub(channel).QueryHistory(request, timeout=10)


def inventory(address: str) -> pb.Inventory:
    with grpc.insecure_channel(address) as channel:
        return pb_grpc.NodeServiceStub(channel).GetInventory(pb.GetInventoryRequest(), timeout=5)


def wait_for_a_tick(address: str, after_ms: int) -> None:
    def stored() -> bool:
        answer = history(address, start_unix_ms=after_ms, metrics=["power_w"])
        return max(answer.timestamps_unix_ms, default=0) > after_ms

    wait_for(stored, 15, "a tick of this run in the history")


def now_ms() -> int:
    return int(time.time() * 1000)


def seeded_temp(at_ms: int) -> float:
    """40 + the tick's place in its minute (0..5 at 10 s ticks): mean 42.5, max 45."""
    return 40.0 + (at_ms // 10_000) % 6


def test_a_restarted_daemon_serves_the_hour_before_it_raw_and_older_hours_downsampled(
    tmp_path: Path,
) -> None:
    start = now_ms() // 60_000 * 60_000 - 3 * HOUR_MS
    seed(tmp_path / "state", start, now_ms(), 1000, lambda at_ms: 50.0)
    node = daemon(tmp_path).start()
    try:
        first_run = now_ms()
        wait_for_a_tick(node.address, first_run)
        node.stop()
        node.start()
        end = now_ms()
        hour = history(node.address, start_unix_ms=end - HOUR_MS, end_unix_ms=end,
                       metrics=["temp_gpu_c"], gpu_indices=[1], max_points=20_000)  # fmt: skip
        hours = history(node.address, start_unix_ms=start, end_unix_ms=end, metrics=["temp_gpu_c"])
        tiers = {t.name: t for t in inventory(node.address).history_tiers}
    finally:
        node.stop()
    assert hour.tier == "raw" and hour.step_ms == 1000
    seeded = [t for t in hour.timestamps_unix_ms if t < first_run]
    assert len(seeded) >= 3500 and seeded[0] <= end - HOUR_MS + 2000, (len(seeded), seeded[:2])
    assert hour.series[0].values[0] == 50.0
    assert max(hour.timestamps_unix_ms) > first_run  # the first run's own ticks, too
    assert hours.tier == "10s" and hours.timestamps_unix_ms[0] == start
    assert len(hours.timestamps_unix_ms) >= 3 * 360 - 1
    assert set(tiers) == {"raw", "10s", "1m"}
    assert tiers["10s"].oldest_unix_ms == start and tiers["1m"].retention_s == 30 * 86400


def test_a_day_comes_from_the_minute_tier_with_each_minutes_mean_and_max(tmp_path: Path) -> None:
    end = now_ms() // 60_000 * 60_000
    seed(tmp_path / "state", end - 25 * HOUR_MS, end, 10_000, seeded_temp)
    node = daemon(tmp_path).start()
    try:
        # Ending a minute early: the seed's last minute closes only with a later tick.
        day = history(node.address, start_unix_ms=end - 24 * HOUR_MS - 60_000,
                      end_unix_ms=end - 60_001, metrics=["temp_gpu_c"],
                      gpu_indices=[0])  # fmt: skip
        month = history(node.address, start_unix_ms=end - 30 * 24 * HOUR_MS,
                        metrics=["temp_gpu_c"], max_points=100)  # fmt: skip
    finally:
        node.stop()
    assert (day.tier, day.step_ms, len(day.timestamps_unix_ms)) == ("1m", 60_000, 1440)
    assert day.timestamps_unix_ms[0] == end - 24 * HOUR_MS - 60_000
    assert set(day.series[0].values) == {42.5} and set(day.series[0].max_values) == {45.0}
    # More than max_points minutes: merged, and the step says by how much.
    assert month.tier == "1m" and len(month.timestamps_unix_ms) <= 100
    assert month.step_ms % 60_000 == 0 and month.step_ms > 60_000
    assert {s.gpu_index for s in month.series} == {0, 1}


BAD_REQUESTS = [
    ({"metrics": ["temp_gpu"]}, "unknown metric 'temp_gpu'"),
    ({"start_unix_ms": 2_000, "end_unix_ms": 1_000}, "is after end_unix_ms"),
    ({"gpu_indices": [5]}, "GPU 5 is not on this node (its GPUs: 0, 1)"),
    ({"max_points": 20_001}, "max_points 20001 is more than 20,000"),
]


def test_a_bad_request_is_invalid_argument_saying_why_and_the_daemon_serves_on(
    tmp_path: Path,
) -> None:
    started = now_ms()
    node = daemon(tmp_path).start()
    refusals = []
    try:
        for fields, _ in BAD_REQUESTS:
            with pytest.raises(grpc.RpcError) as refused:
                history(node.address, **fields)
            refusals.append((refused.value.code(), refused.value.details() or ""))
        wait_for_a_tick(node.address, started)
        served = history(node.address, start_unix_ms=now_ms() - 60_000, metrics=["temp_gpu_c"])
        lines = inventory(node.address).alert_thresholds
    finally:
        node.stop()
    for (code, details), (_, reason) in zip(refusals, BAD_REQUESTS, strict=True):
        assert code == grpc.StatusCode.INVALID_ARGUMENT and reason in details, details
    assert served.tier == "raw" and len(served.series) == 2
    assert {(t.rule, t.metric, t.severity, t.value) for t in lines} == {
        ("gpu_temp", "temp_gpu_c", pb.SEVERITY_WARNING, 75.0),
        ("gpu_temp", "temp_gpu_c", pb.SEVERITY_CRITICAL, 85.0),
        ("memory_temp", "temp_mem_c", pb.SEVERITY_WARNING, 85.0),
        ("memory_temp", "temp_mem_c", pb.SEVERITY_CRITICAL, 95.0),
    }


def ticks_after(address: str, after_ms: int, count: int) -> list[int]:
    """The times of the next `count` sweeps stamped after after_ms, from the live stream."""

    def later(batch: pb.SampleBatch) -> int | None:
        return batch.timestamp_unix_ms if batch.timestamp_unix_ms > after_ms else None

    with grpc.insecure_channel(address) as channel:
        stream = pb_grpc.NodeServiceStub(channel).StreamSamples(
            pb.StreamSamplesRequest(), timeout=15
        )
        return first_of(stream, count, later)


def metrics_page(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as page:
        return str(page.read().decode())


def test_a_full_state_disk_keeps_the_daemon_serving_what_is_stored_and_the_spell_is_written_after(
    disk: SmallDisk,  # noqa: F811
    tmp_path: Path,
) -> None:
    """(A read-only state directory stops the daemon before history opens: the workloads
    directory's chmod fails with EROFS. The store's own read-only handling is tested in
    test_history_store.py.)"""
    end = now_ms()
    seed(disk.path, end - HOUR_MS, end, 1000, lambda at_ms: 61.0)
    port = free_port()
    node = daemon(tmp_path, "--metrics-listen", f"127.0.0.1:{port}")
    assert disk.path == tmp_path / "state"  # the daemon's state dir is the small disk
    node.start()  # a first run makes its other state files
    node.stop()
    disk.fill()
    try:
        node.start()
        spell = now_ms()
        answer = history(node.address, start_unix_ms=end - HOUR_MS, end_unix_ms=end,
                         metrics=["temp_gpu_c"], gpu_indices=[0], max_points=20_000)  # fmt: skip
        wait_for(lambda: "gpufleet_history_writable 0.0" in metrics_page(port), 15,
                 "the history to say it cannot be written")  # fmt: skip
        spell_ticks = ticks_after(node.address, spell, 3)
    finally:
        disk.free()
    try:
        wait_for(lambda: "gpufleet_history_writable 1.0" in metrics_page(port), 15,
                 "the history to be written again")  # fmt: skip
        after = history(node.address, start_unix_ms=spell, metrics=["power_w"], gpu_indices=[1])
    finally:
        node.stop()
    # The first run's ticks pruned the hour's first seconds (retention counts from the newest).
    assert answer.tier == "raw" and len(answer.timestamps_unix_ms) >= 3500
    assert set(answer.series[0].values) == {61.0}
    assert "metric history" in node.log.read_text()
    # The ticks of the spell waited in memory and are on disk now.
    assert set(spell_ticks) <= set(after.timestamps_unix_ms), (spell_ticks, after)


def test_a_node_of_one_gpu_model_gets_that_models_lines_and_a_disabled_rule_none() -> None:
    l40s = ThresholdSettings(warning=80.0, critical=88.0)
    settings = replace(
        AlertSettings(),
        gpu_temp=replace(AlertSettings().gpu_temp, models={"NVIDIA L40S": l40s}),
        memory_temp=replace(AlertSettings().memory_temp, enabled=False),
    )
    lines = {(t.rule, t.value) for t in alert_thresholds(settings, ["NVIDIA L40S"] * 4)}
    mixed = {(t.rule, t.value) for t in alert_thresholds(settings, ["NVIDIA L40S", "H100"])}
    assert lines == {("gpu_temp", 80.0), ("gpu_temp", 88.0)}
    assert mixed == {("gpu_temp", 75.0), ("gpu_temp", 85.0)}
