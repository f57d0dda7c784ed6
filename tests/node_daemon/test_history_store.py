"""The on-disk metric history (node_daemon.history) on a real SQLite file.

Ticks are stamped by the test (the store takes its times from the sweeps), so a
day is written in seconds.
"""

from __future__ import annotations

import math
import random
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from gpufleet.v1 import node_pb2 as pb
from node_daemon.backends.readings import GpuReading
from node_daemon.config import DaemonConfig
from node_daemon.errors import ConfigError, Invalid
from node_daemon.history.codec import encode
from node_daemon.history.query import answer_query, parse_query
from node_daemon.history.settings import MIB, HistorySettings, parse_history_settings
from node_daemon.history.store import HistoryDataLoss, HistoryStore
from node_daemon.reload import plan_reload
from tests.node_daemon.test_full_disk import SmallDisk, disk  # noqa: F401

T0_MS = 1_800_000_000_000  # a multiple of a minute
Values = Callable[[int, int], float | None]  # (tick, gpu) → temp_gpu_c


def readings(tick: int, gpus: int, temp: Values, noise: bool = False) -> list[GpuReading]:
    """temp_gpu_c as told, power_w 100 + GPU; with `noise`, utilisation and clocks that
    hardly compress, as a busy GPU's do."""
    jitter = random.Random(tick)

    def extra() -> dict[str, float]:
        if not noise:
            return {}
        return {"util_gpu_pct": jitter.uniform(0, 100), "util_mem_pct": jitter.uniform(0, 100),
                "sm_clock_mhz": jitter.randrange(2000)}  # fmt: skip

    return [GpuReading(index=g, temp_gpu_c=temp(tick, g), power_w=100.0 + g, **extra())
            for g in range(gpus)]  # fmt: skip


def write(
    store: HistoryStore, ticks: range, step_ms: int, gpus: int, temp: Values, noise: bool = False
) -> None:
    """Ticks stamped T0 + tick * step_ms, flushed every 5 as the writer thread does."""
    for tick in ticks:
        store.append(T0_MS + tick * step_ms, readings(tick, gpus, temp, noise))
        if tick % 5 == 4:
            store.flush()
    store.flush()


def query(
    store: HistoryStore, start_ms: int, end_ms: int, **fields: object
) -> pb.QueryHistoryResponse:
    request = pb.QueryHistoryRequest(start_unix_ms=start_ms, end_unix_ms=end_ms, **fields)  # type: ignore[arg-type]
    return answer_query(store, parse_query(request, end_ms, store.gpus()))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[HistoryStore]:
    opened = HistoryStore(tmp_path / "history.sqlite3", HistorySettings(), raw_step_ms=1000)
    yield opened
    opened.close()


def test_a_ten_second_step_keeps_the_mean_and_the_max_and_nan_where_a_gpu_did_not_report(
    store: HistoryStore,
) -> None:
    # GPU 0: 0..9 in each 10 s step; GPU 1 reports no temperature at all.
    write(store, range(40), 1000, 2, lambda tick, gpu: float(tick % 10) if gpu == 0 else None)
    steps = store.read(store.tiers[1], T0_MS, T0_MS + 40_000)
    assert [p.timestamp_ms for p in steps] == [T0_MS, T0_MS + 10_000, T0_MS + 20_000]
    answer = query(store, T0_MS, T0_MS + 29_999, metrics=["temp_gpu_c", "power_w"], max_points=5)
    assert answer.tier == "10s" and answer.step_ms == 10_000
    by_key = {(s.gpu_index, s.metric): s for s in answer.series}
    assert list(by_key[0, "temp_gpu_c"].values) == [4.5, 4.5, 4.5]
    assert list(by_key[0, "temp_gpu_c"].max_values) == [9.0, 9.0, 9.0]
    assert all(math.isnan(v) for v in by_key[1, "temp_gpu_c"].values)
    assert list(by_key[1, "power_w"].values) == [101.0] * 3


def test_the_minute_tier_weighs_each_tick_once(store: HistoryStore) -> None:
    # A ramp 0..59 each minute: the minute's mean is 29.5 whatever the 10 s steps were.
    write(store, range(180), 1000, 1, lambda tick, gpu: float(tick % 60))
    minutes = store.read(store.tiers[2], T0_MS, T0_MS + 180_000)
    assert [p.timestamp_ms for p in minutes] == [T0_MS, T0_MS + 60_000]
    position = minutes[0].layout.position(0, "temp_gpu_c")
    assert position is not None
    assert [(p.means[position], p.maxes[position]) for p in minutes] == [(29.5, 59.0)] * 2


def test_a_step_cut_by_a_restart_is_whole_after_it(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    first = HistoryStore(path, HistorySettings(), raw_step_ms=1000)
    write(first, range(15), 1000, 1, lambda tick, gpu: float(tick))  # step 10..19 half done
    first.close()
    second = HistoryStore(path, HistorySettings(), raw_step_ms=1000)
    write(second, range(15, 25), 1000, 1, lambda tick, gpu: float(tick))
    steps = second.read(second.tiers[1], T0_MS, T0_MS + 25_000)
    second.close()
    position = steps[1].layout.position(0, "temp_gpu_c")
    assert position is not None
    assert [p.timestamp_ms for p in steps] == [T0_MS, T0_MS + 10_000]
    assert (steps[1].means[position], steps[1].maxes[position]) == (14.5, 19.0)


def test_each_tier_is_pruned_to_its_retention(tmp_path: Path) -> None:
    settings = HistorySettings(raw_retention_s=60, ten_second_retention_s=120)
    store = HistoryStore(tmp_path / "history.sqlite3", settings, raw_step_ms=1000)
    write(store, range(600), 1000, 1, lambda tick, gpu: 50.0)
    oldest = store.oldest_ms()
    store.close()
    newest_ms = T0_MS + 599_000
    assert oldest["raw"] == newest_ms - 60_000
    assert oldest["10s"] == newest_ms + 1000 - 120_000  # steps start on the 10 s
    assert oldest["1m"] == T0_MS  # 30 days: nothing is old enough


def test_the_file_stays_within_max_bytes_giving_up_the_oldest_points(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    settings = HistorySettings(max_bytes=MIB, ten_second_retention_s=10 * 86400)
    store = HistoryStore(path, settings, raw_step_ms=10_000)
    # 4 busy GPUs, a tick every 10 s for half a day: about 3 MiB unbounded.
    write(store, range(4320), 10_000, 4, lambda tick, gpu: float((tick * 7 + gpu) % 90), True)
    oldest, newest = store.oldest_ms(), T0_MS + (4320 - 1) * 10_000
    latest = query(store, newest - 600_000, newest, metrics=["temp_gpu_c"], gpu_indices=[3])
    store.close()
    assert path.stat().st_size <= MIB + 64 * 1024, path.stat().st_size
    # The newest hour is all there; the bound took the oldest 10 s steps.
    assert latest.tier == "raw" and len(latest.timestamps_unix_ms) == 61
    assert oldest["10s"] is not None and oldest["10s"] > T0_MS


def test_a_row_written_under_an_older_catalogue_still_reads(store: HistoryStore) -> None:
    write(store, range(3), 1000, 1, lambda tick, gpu: 60.0)
    with sqlite3.connect(store.path) as db:  # an older daemon knew two metrics only
        db.execute("INSERT INTO layouts (id, gpus, metrics) VALUES (99, '0', 'power_w,temp_gpu_c')")
        db.execute(
            "INSERT INTO points VALUES (0, ?, 99, ?, NULL)", (T0_MS - 1000, encode([250.0, 70.0]))
        )
    answer = query(store, T0_MS - 1000, T0_MS + 2000, metrics=["temp_gpu_c", "fan_pct"])
    temps = {s.metric: list(s.values) for s in answer.series}
    assert temps["temp_gpu_c"] == [70.0, 60.0, 60.0, 60.0]
    assert all(math.isnan(v) for v in temps["fan_pct"])


def test_a_read_only_disk_serves_what_is_stored_and_takes_ticks_without_failing(
    disk: SmallDisk,  # noqa: F811
) -> None:
    path = disk.path / "history.sqlite3"
    store = HistoryStore(path, HistorySettings(), raw_step_ms=1000)
    write(store, range(30), 1000, 1, lambda tick, gpu: 40.0)
    store.close()
    subprocess.run(["mount", "-o", "remount,ro", str(disk.path)], check=True)
    try:
        store = HistoryStore(path, HistorySettings(), raw_step_ms=1000)
        assert not store.writable
        write(store, range(30, 40), 1000, 1, lambda tick, gpu: 41.0)  # kept in memory, no error
        answer = query(store, T0_MS, T0_MS + 29_000, metrics=["temp_gpu_c"])
        store.close()
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(disk.path)], check=True)
    assert answer.tier == "raw" and list(answer.series[0].values) == [40.0] * 30


@pytest.mark.parametrize(
    ("table", "key"),
    [({"max_bytes": 1000}, "history.max_bytes"), ({"enabled": 1}, "history.enabled"),
     ({"raw_retention_s": "1h"}, "history.raw_retention_s"), ({"keep": 3}, "keep")],
)  # fmt: skip
def test_a_bad_history_table_names_its_key(table: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        parse_history_settings(table, "daemon.toml")


def test_a_reload_keeps_the_history_settings_in_force_and_says_a_restart_is_needed() -> None:
    old = DaemonConfig()
    new = replace(old, history=HistorySettings(max_bytes=64 * MIB))
    plan = plan_reload(old, new)
    assert "history" in plan.needs_restart
    assert plan.config.history == old.history


def test_an_answer_too_big_for_one_message_is_refused_naming_what_to_ask_less_of(
    store: HistoryStore,
) -> None:
    write(store, range(3100), 1000, 8, lambda tick, gpu: 50.0)  # 3,100 points x 8 x 30-odd
    with pytest.raises(Invalid, match="ask for fewer metrics or GPUs, or a smaller max_points"):
        query(store, T0_MS, T0_MS + 3_100_000, max_points=20_000)
    answer = query(store, T0_MS, T0_MS + 3_100_000, max_points=20_000, metrics=["temp_gpu_c"])
    assert answer.tier == "raw" and len(answer.series) == 8


def test_a_file_that_is_no_history_is_set_aside_and_a_new_one_begun(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    path.write_bytes(b"not a database, a disk's garbage " * 200)
    store = HistoryStore(path, HistorySettings(), raw_step_ms=1000)
    write(store, range(3), 1000, 1, lambda tick, gpu: 33.0)
    answer = query(store, T0_MS, T0_MS + 2000, metrics=["temp_gpu_c"])
    store.close()
    assert list(answer.series[0].values) == [33.0] * 3
    (aside,) = tmp_path.glob("history.sqlite3.broken-*")
    assert aside.read_bytes().startswith(b"not a database")


class BootClock:
    """A boot-time clock the test moves, a second a tick, as the sampler's sweeps do."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __call__(self) -> float:
        return self.seconds


def test_a_clock_step_forward_then_back_prunes_nothing_and_recording_goes_on(
    tmp_path: Path,
) -> None:
    path, boot, day_ms = tmp_path / "history.sqlite3", BootClock(5000.0), 86_400_000

    def tick(store: HistoryStore, at_ms: int) -> None:
        store.append(at_ms, readings(0, 1, lambda tick, gpu: 70.0))
        boot.seconds += 1
        store.flush()

    store = HistoryStore(path, HistorySettings(), raw_step_ms=1000, boot_clock=boot)
    for n in range(120):
        tick(store, T0_MS + n * 1000)
    for n in range(4):  # 40 days ahead for 4 sweeps
        tick(store, T0_MS + 40 * day_ms + (120 + n) * 1000)
    for n in range(124, 184):  # put back
        tick(store, T0_MS + n * 1000)
    during = {t.name: [p.timestamp_ms for p in store.read(t, T0_MS, T0_MS + 200_000)]
              for t in store.tiers}  # fmt: skip
    store.close()
    again = HistoryStore(path, HistorySettings(), raw_step_ms=1000, boot_clock=boot)
    for n in range(184, 190):  # a restart after the step
        tick(again, T0_MS + n * 1000)
    raw = [p.timestamp_ms for p in again.read(again.tiers[0], T0_MS, T0_MS + 200_000)]
    ahead = again.read(again.tiers[0], T0_MS + 40 * day_ms, T0_MS + 41 * day_ms)
    again.close()
    assert during["raw"] == [T0_MS + n * 1000 for n in [*range(120), *range(124, 184)]]
    assert during["10s"][:12] == [T0_MS + n * 10_000 for n in range(12)]
    assert during["1m"][:2] == [T0_MS, T0_MS + 60_000]
    assert raw == [T0_MS + n * 1000 for n in [*range(120), *range(124, 190)]]
    assert len(ahead) == 4  # what the clock said while it was wrong is kept too


def test_rows_that_do_not_decode_in_any_way_are_skipped_counted_and_the_rest_read(
    store: HistoryStore,
) -> None:
    write(store, range(6), 1000, 1, lambda tick, gpu: 20.0)
    with sqlite3.connect(store.path) as db:
        db.executemany("UPDATE points SET mean = ? WHERE tier = 0 AND ts_ms = ?", [
            (encode([1.0, 2.0]), T0_MS + 1000),  # deflate, but 2 values for a layout of 30-odd
            (b"\x78\x9c\x01\x03", T0_MS + 2000),  # a deflate stream cut short
            ("text, not a blob", T0_MS + 3000),
        ])  # fmt: skip
        db.execute("UPDATE points SET layout = 77 WHERE tier = 0 AND ts_ms = ?", (T0_MS + 4000,))
    answer = query(store, T0_MS, T0_MS + 5000, metrics=["temp_gpu_c"], max_points=100)
    again = query(store, T0_MS, T0_MS + 5000, metrics=["temp_gpu_c"], max_points=100)
    with pytest.raises(HistoryDataLoss, match=r"1 raw rows .* 2 values where its layout has"):
        query(store, T0_MS + 1000, T0_MS + 1000)
    assert list(answer.timestamps_unix_ms) == [T0_MS, T0_MS + 5000]
    assert list(answer.series[0].values) == [20.0, 20.0]
    assert list(again.timestamps_unix_ms) == [T0_MS, T0_MS + 5000]
    assert store.corrupt_rows == 4  # each row once, however often it is read
