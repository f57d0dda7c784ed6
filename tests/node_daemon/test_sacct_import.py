"""Importing Slurm's sacct output: any column order with its header, AllocTRES or AllocGRES,
the old header-less format; each job counted once however many exports carry it."""

from __future__ import annotations

import datetime as dt
import zoneinfo
from pathlib import Path

import pytest

from gpufleet.v1 import node_pb2 as pb
from node_daemon.usage.importer import UsageImportError, import_sacct_file, parse_sacct
from node_daemon.usage.query import query_usage
from node_daemon.usage.sacct import (
    SacctError,
    count_hosts,
    gpu_allocation,
    parse_sacct_jobs,
    split_by_utc_day,
)
from node_daemon.usage.store import UsageStore
from tests.node_daemon.usage_fixtures import empty_usage_store  # noqa: F401 (the `store` fixture)

SAMPLES = Path(__file__).parent / "sacct"
HOUR = 3600.0


def sample(name: str) -> str:
    return (SAMPLES / name).read_text(encoding="utf-8")


def report(
    store: UsageStore, group_by: pb.UsageGrouping.ValueType = pb.USAGE_GROUPING_USER
) -> dict[str, pb.UsageRow]:
    query = pb.QueryUsageRequest(group_by=group_by)
    answer = query_usage(store, [], lambda _u: (), query, "node-a", dt.date(2024, 6, 30))
    return {row.key: row for row in answer.rows}


def test_a_header_names_the_columns_in_any_order() -> None:
    first, skipped = parse_sacct_jobs(sample("header_slurm23.txt"), dt.UTC)
    again, _ = parse_sacct_jobs(sample("header_reordered.txt"), dt.UTC)
    by_id = {job.job_id: job for job in first}
    # 3 steps, the CPU-only job and the pending one carry no GPU time of their own.
    assert skipped == 5
    assert sorted(by_id) == ["4711", "4712", "4714", "4715_3", "4720"]
    assert (by_id["4712"].user, by_id["4712"].account, by_id["4712"].state) == (
        "bob", "vision", "CANCELLED",
    )  # fmt: skip
    assert (by_id["4712"].gpus, by_id["4712"].gpu_type, by_id["4712"].cluster) == (1, "a100", "hpc")
    assert by_id["4714"].end is None  # still running when exported
    assert (by_id["4720"].gpus, by_id["4720"].nodes) == (16, 2)
    reordered = {job.job_id: job for job in again}
    assert reordered["4712"] == by_id["4712"]  # the same job, whatever the columns
    assert reordered["4714"].end == dt.datetime(2024, 6, 2, 12, tzinfo=dt.UTC)


def test_old_alloc_gres_is_read() -> None:
    jobs, skipped = parse_sacct_jobs(sample("alloc_gres_slurm17.txt"), dt.UTC)
    by_id = {job.job_id: job for job in jobs}
    assert skipped == 2  # the step, the job without GPUs
    assert (by_id["901"].gpus, by_id["901"].gpu_type) == (4, "")
    assert (by_id["902"].gpus, by_id["902"].gpu_type) == (2, "k80")
    assert (by_id["904"].gpus, by_id["904"].gpu_type, by_id["904"].nodes) == (3, "", 2)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("billing=16,cpu=16,gres/gpu=2,mem=128G,node=1", (2, "")),
        ("cpu=2,gres/gpu:h100=2,gres/gpu:a100=1,mem=8G", (3, "")),
        ("gres/gpu:a100=1,gres/gpu=1", (1, "a100")),
        ("cpu=4,mem=16G,gres/gpumem=10G", (0, "")),
        ("gpu:4", (4, "")),
        ("gpu:a100:2", (2, "a100")),
        ("gpu:tesla:2(IDX:0,2)", (2, "tesla")),
        ("craynetwork:1,gpu:v100:1", (1, "v100")),
        ("", (0, "")),
    ],
)
def test_gpus_from_alloc_tres_and_alloc_gres(text: str, expected: tuple[int, str]) -> None:
    assert gpu_allocation(text) == expected


@pytest.mark.parametrize(
    ("nodes", "count"),
    [("gpu01", 1), ("gpu[01-04]", 4), ("n[01-04,07],gpu5", 6), ("a[1,3],b[10-11]", 4), ("", 1)],
)
def test_host_lists_are_counted(nodes: str, count: int) -> None:
    assert count_hosts(nodes) == count


def test_the_old_header_less_format_is_still_read() -> None:
    usage, skipped = parse_sacct(sample("noheader_old.txt"), dt.UTC)
    assert usage[("2024-06-01", "alice")].gpu_seconds == 2 * 2 * HOUR
    assert usage[("2024-06-02", "alice")].gpu_seconds == 2 * 2 * HOUR  # the running one: not
    assert usage[("2024-06-02", "bob")].gpu_seconds == 1800
    assert usage[("2024-06-02", "dave")].gpu_seconds == 2 * HOUR
    assert ("2024-06-02", "carol") not in usage
    # The step, the CPU-only job, the running one and the pending one.
    assert skipped == 4


def test_local_times_are_converted_to_utc() -> None:
    usage, _ = parse_sacct(sample("noheader_old.txt"), zoneinfo.ZoneInfo("Europe/Berlin"))
    # 22:00-02:00 CEST is 20:00-24:00 UTC: all on June 1.
    assert usage[("2024-06-01", "alice")].gpu_seconds == 2 * 4 * HOUR
    assert ("2024-06-02", "alice") not in usage


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("JobID|User|Start|End|AllocTRES\n1|a|2024-06-01T10:00:00|2024-06-01T11:00:00\n",
         r"sacct line 2: expected 5 fields separated by \| the header's, got 4"),
        ("JobID|User|Start|End|AllocTRES\n1|a|yesterday|2024-06-01T11:00:00|gres/gpu=1\n",
         "sacct line 2, column Start: 'yesterday' is not a time"),
        ("User|JobID|End|Start|AllocGRES\n\na|1|soon|2024-06-01T11:00:00|gpu:1\n",
         "sacct line 3, column End: 'soon' is not a time"),
        ("JobID|Account|Start|End|AllocTRES\n", r"sacct line 1: the header lacks column\(s\) User"),
        ("JobID|User|Start|End\n", r"lacks column\(s\) AllocTRES \(or AllocGRES\)"),
        ("JobID|User|Start|End|AllocTRES|NNodes\n1|a|2024-06-01T10:00:00|"
         "2024-06-01T11:00:00|gres/gpu=1|many\n", "sacct line 2, column NNodes: 'many'"),
        ("4711|alice|2024-06-01T22:00:00|2024-06-02T02:00:00\n",
         r"sacct line 1: expected 5 fields .*\(JobID,User,Start,End,AllocTRES\).*--parsable2"),
    ],
)  # fmt: skip
def test_bad_output_names_the_line_and_the_column(text: str, message: str) -> None:
    with pytest.raises(SacctError, match=message):
        parse_sacct_jobs(text, dt.UTC)


def test_split_by_utc_day() -> None:
    start = dt.datetime(2024, 6, 1, 23, tzinfo=dt.UTC)
    assert list(split_by_utc_day(start, start + dt.timedelta(hours=26))) == [
        ("2024-06-01", 3600.0), ("2024-06-02", 86400.0), ("2024-06-03", 3600.0),
    ]  # fmt: skip
    assert list(split_by_utc_day(start, start)) == []


def write(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    path.write_text(sample(name), encoding="utf-8")
    return path


def test_overlapping_exports_count_each_job_once(store: UsageStore, tmp_path: Path) -> None:
    first = import_sacct_file(store, write(tmp_path, "header_slurm23.txt"), dt.UTC)
    # 4714 runs still: not imported from a file (its end is unknown).
    assert (first.new, first.updated, first.skipped) == (4, 0, 6)
    second = import_sacct_file(store, write(tmp_path, "header_reordered.txt"), dt.UTC)
    assert (second.new, second.updated) == (2, 2)  # 4714 (ended now), 4730; 4712, 4715_3 again
    users = report(store)
    assert users["bob"].gpu_seconds == pytest.approx(1800)  # in both exports, once
    assert users["dave"].gpu_seconds == pytest.approx(2 * HOUR)
    assert users["alice"].gpu_seconds == pytest.approx((8 + 4 + 0.25) * HOUR)
    assert users["frank"].gpu_seconds == pytest.approx(32 * HOUR)  # a file bills the whole job


def test_the_same_file_again_changes_nothing(store: UsageStore, tmp_path: Path) -> None:
    path = write(tmp_path, "header_slurm23.txt")
    import_sacct_file(store, path, dt.UTC)
    before = report(store)
    again = import_sacct_file(store, path, dt.UTC)
    assert (again.new, again.updated) == (0, 4)
    assert report(store) == before


def test_usage_by_slurm_account(store: UsageStore, tmp_path: Path) -> None:
    import_sacct_file(store, write(tmp_path, "header_slurm23.txt"), dt.UTC)
    import_sacct_file(store, write(tmp_path, "header_reordered.txt"), dt.UTC)
    accounts = report(store, pb.USAGE_GROUPING_ACCOUNT)
    assert set(accounts) == {"ml", "vision", "physics"}
    assert accounts["ml"].gpu_seconds == pytest.approx((8 + 4 + 0.25) * HOUR)
    assert accounts["vision"].gpu_seconds == pytest.approx(0.5 * HOUR + 2 * HOUR)
    assert list(accounts["physics"].accounts) == ["physics"]
    assert list(report(store)["alice"].accounts) == ["ml"]


def test_a_bad_file_adds_nothing(store: UsageStore, tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text(sample("header_slurm23.txt") + "4799|zoe|ml|later|2024-06-02T02:00:00|"
                   "COMPLETED|gres/gpu=1|gpu01|1|hpc\n", encoding="utf-8")  # fmt: skip
    with pytest.raises(UsageImportError, match="sacct line 12, column Start: 'later'"):
        import_sacct_file(store, bad, dt.UTC)
    assert report(store) == {}
