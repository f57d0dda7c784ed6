"""Importing usage history: our CSV; a file twice is refused (sacct: test_sacct_import.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufleet.v1 import node_pb2 as pb
from node_daemon.usage.importer import UsageImportError, import_file, parse_usage_csv
from node_daemon.usage.store import AlreadyImported, UsageStore
from tests.node_daemon.test_usage import report, rows
from tests.node_daemon.usage_fixtures import empty_usage_store  # noqa: F401 (the `store` fixture)

CSV_SAMPLE = """\
day,user,gpu_seconds,busy_gpu_seconds,memory_gib_seconds,energy_joules,reserved_seconds,reserved_idle_seconds
2024-05-01,alice,7200,3600,1000,2500000,0,0
2024-05-01,bob,3600,0,0,0,86400,86400
2024-05-02,alice,1800.5,900,,,0,0
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


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


def test_the_same_file_twice_is_refused(store: UsageStore, tmp_path: Path) -> None:
    import_file(store, write(tmp_path, "usage.csv", CSV_SAMPLE), "csv")
    copy = write(tmp_path, "renamed-copy.csv", CSV_SAMPLE)
    with pytest.raises(AlreadyImported, match=r"already imported on .* \(from .*usage.csv"):
        import_file(store, copy, "csv")
    assert rows(report(store))["bob"].gpu_seconds == 3600  # counted once


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
