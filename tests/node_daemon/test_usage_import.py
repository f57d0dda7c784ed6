"""Importing usage history: our CSV and Slurm sacct output; a file twice is refused."""

from __future__ import annotations

import datetime as dt
import zoneinfo
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpufleet.v1 import node_pb2 as pb
from node_daemon.usage.importer import (
    UsageImportError,
    gpu_count,
    import_file,
    parse_sacct,
    parse_usage_csv,
    split_by_utc_day,
)
from node_daemon.usage.store import USAGE_FILE, AlreadyImported, UsageStore
from tests.node_daemon.test_usage import report, rows

# Recorded from `sacct --parsable2 --noheader --format=JobID,User,Start,End,AllocTRES`
# on a Slurm 23.02 cluster (names changed): jobs, their steps, a CPU-only job, a
# running job, a pending one, an array task and a job with typed GPUs only.
SACCT_SAMPLE = """\
4711|alice|2024-06-01T22:00:00|2024-06-02T02:00:00|billing=16,cpu=16,gres/gpu=2,mem=128G,node=1
4711.batch||2024-06-01T22:00:00|2024-06-02T02:00:00|cpu=16,gres/gpu=2,mem=128G,node=1
4711.extern||2024-06-01T22:00:00|2024-06-02T02:00:00|billing=16,cpu=16,gres/gpu=2,mem=128G,node=1
4711.0||2024-06-01T22:00:05|2024-06-02T01:59:58|cpu=16,gres/gpu=2,mem=128G,node=1
4712|bob|2024-06-02T08:00:00|2024-06-02T08:30:00|billing=8,cpu=8,gres/gpu:a100=1,gres/gpu=1,mem=64G,node=1
4713|carol|2024-06-02T09:00:00|2024-06-02T10:00:00|billing=4,cpu=4,mem=16G,node=1
4714|alice|2024-06-02T11:00:00|Unknown|billing=4,cpu=4,gres/gpu=4,mem=16G,node=1
4715_3|dave|2024-06-02T12:00:00|2024-06-02T13:00:00|cpu=2,gres/gpu:h100=2,mem=8G,node=1
4716|erin|Unknown|Unknown|
"""

CSV_SAMPLE = """\
day,user,gpu_seconds,busy_gpu_seconds,memory_gib_seconds,energy_joules,reserved_seconds,reserved_idle_seconds
2024-05-01,alice,7200,3600,1000,2500000,0,0
2024-05-01,bob,3600,0,0,0,86400,86400
2024-05-02,alice,1800.5,900,,,0,0
"""


@pytest.fixture
def store(tmp_path: Path) -> Iterator[UsageStore]:
    usage = UsageStore(tmp_path / USAGE_FILE)
    yield usage
    usage.close()


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_sacct_jobs_split_across_utc_days_and_steps_skipped() -> None:
    usage, skipped = parse_sacct(SACCT_SAMPLE, dt.UTC)
    assert usage[("2024-06-01", "alice")].gpu_seconds == 2 * 2 * 3600
    assert usage[("2024-06-02", "alice")].gpu_seconds == 2 * 2 * 3600
    assert usage[("2024-06-02", "bob")].gpu_seconds == 1800
    assert usage[("2024-06-02", "dave")].gpu_seconds == 2 * 3600
    assert ("2024-06-02", "carol") not in usage
    # 3 steps, the CPU-only job, the running job and the pending one.
    assert skipped == 6
    # sacct knows no utilisation: busy GPU-seconds stay 0.
    assert all(a.busy_gpu_seconds == 0 for a in usage.values())


def test_sacct_local_times_are_converted_to_utc() -> None:
    usage, _ = parse_sacct(SACCT_SAMPLE, zoneinfo.ZoneInfo("Europe/Berlin"))
    # 22:00-02:00 CEST is 20:00-24:00 UTC: all on June 1.
    assert usage[("2024-06-01", "alice")].gpu_seconds == 2 * 4 * 3600
    assert ("2024-06-02", "alice") not in usage


def test_a_bad_sacct_line_names_the_line_and_the_command() -> None:
    with pytest.raises(UsageImportError, match=r"sacct line 2: expected 5 fields.*--parsable2"):
        parse_sacct("4711|alice|2024-06-01T22:00:00|2024-06-02T02:00:00|gres/gpu=1\nJobID,User\n")
    with pytest.raises(UsageImportError, match="sacct line 1: 'yesterday' is not a time"):
        parse_sacct("4711|alice|yesterday|2024-06-02T02:00:00|gres/gpu=1\n")


def test_a_header_line_is_skipped() -> None:
    usage, skipped = parse_sacct("JobID|User|Start|End|AllocTRES\n" + SACCT_SAMPLE, dt.UTC)
    assert skipped == 7
    assert usage[("2024-06-02", "bob")].gpu_seconds == 1800


@pytest.mark.parametrize(
    ("tres", "gpus"),
    [
        ("billing=16,cpu=16,gres/gpu=2,mem=128G,node=1", 2),
        ("cpu=2,gres/gpu:h100=2,gres/gpu:a100=1,mem=8G", 3),
        ("gres/gpu:a100=1,gres/gpu=1", 1),
        ("gres/gpu=8", 8),
        ("cpu=4,mem=16G,gres/gpumem=10G", 0),
        ("", 0),
    ],
)
def test_gpu_count_from_alloc_tres(tres: str, gpus: int) -> None:
    assert gpu_count(tres) == gpus


def test_split_by_utc_day() -> None:
    start = dt.datetime(2024, 6, 1, 23, tzinfo=dt.UTC)
    assert list(split_by_utc_day(start, start + dt.timedelta(hours=26))) == [
        ("2024-06-01", 3600.0), ("2024-06-02", 86400.0), ("2024-06-03", 3600.0),
    ]  # fmt: skip
    assert list(split_by_utc_day(start, start)) == []


def test_csv_rows_are_read_with_empty_cells_as_zero() -> None:
    usage = parse_usage_csv(CSV_SAMPLE)
    assert usage[("2024-05-01", "alice")].energy_joules == 2_500_000
    assert usage[("2024-05-02", "alice")].gpu_seconds == 1800.5
    assert usage[("2024-05-02", "alice")].memory_gib_seconds == 0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("day,user,gpu_seconds\n2024-05-01,alice,1\n", "CSV line 1: missing column"),
        (CSV_SAMPLE + "2024-05-32,alice,1,1,1,1,0,0\n", "CSV line 5: day must be a day like"),
        (CSV_SAMPLE + "2024-05-03,,1,1,1,1,0,0\n", "CSV line 5: user is empty"),
        (CSV_SAMPLE + "2024-05-03,bob,-1,1,1,1,0,0\n", "CSV line 5: gpu_seconds must be a number"),
        (CSV_SAMPLE + "2024-05-03,bob,1,nan,1,1,0,0\n", "busy_gpu_seconds must be a number"),
    ],
)
def test_bad_csv_is_refused_with_the_line(text: str, message: str) -> None:
    with pytest.raises(UsageImportError, match=message):
        parse_usage_csv(text)


def test_import_adds_history_to_the_store(store: UsageStore, tmp_path: Path) -> None:
    summary = import_file(store, write(tmp_path, "usage.csv", CSV_SAMPLE), "csv")
    assert (summary.rows, summary.users) == (3, 2)
    assert (summary.first_day, summary.last_day) == ("2024-05-01", "2024-05-02")
    users = rows(report(store))
    assert users["alice"].gpu_seconds == pytest.approx(9000.5)
    assert users["bob"].reserved_idle_seconds == 86400
    summary = import_file(store, write(tmp_path, "sacct.txt", SACCT_SAMPLE), "sacct", dt.UTC)
    assert summary.skipped == 6
    assert rows(report(store, from_day="2024-06-01"))["alice"].gpu_seconds == 4 * 2 * 3600


def test_the_same_file_twice_is_refused(store: UsageStore, tmp_path: Path) -> None:
    import_file(store, write(tmp_path, "sacct.txt", SACCT_SAMPLE), "sacct", dt.UTC)
    copy = write(tmp_path, "renamed-copy.txt", SACCT_SAMPLE)
    with pytest.raises(AlreadyImported, match=r"already imported on .* \(from .*sacct.txt"):
        import_file(store, copy, "sacct", dt.UTC)
    assert rows(report(store))["bob"].gpu_seconds == 1800  # counted once


def test_a_failed_import_adds_nothing(store: UsageStore, tmp_path: Path) -> None:
    bad = write(tmp_path, "bad.csv", CSV_SAMPLE + "2024-05-03,bob,x,1,1,1,0,0\n")
    with pytest.raises(UsageImportError):
        import_file(store, bad, "csv")
    assert not report(store).rows
    # Fixed, the file imports: a refused file is not remembered as imported.
    fixed = write(tmp_path, "bad.csv", CSV_SAMPLE)
    import_file(store, fixed, "csv")
    assert rows(report(store))["alice"].gpu_seconds == pytest.approx(9000.5)


def test_imported_history_adds_to_rows_not_to_the_node_kpis(
    store: UsageStore, tmp_path: Path
) -> None:
    import_file(store, write(tmp_path, "usage.csv", CSV_SAMPLE), "csv")
    assert report(store).kpis == pb.UsageKpis()
