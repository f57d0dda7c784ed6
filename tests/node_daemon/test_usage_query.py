"""query_usage: grouping by user, team, node and day; workloads; KPIs; bad requests."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpufleet.v1 import node_pb2 as pb
from node_daemon.usage.amounts import NodeAmounts, UsageAmounts
from node_daemon.usage.query import NO_TEAM, BadUsageQuery, parse_period, percentile, query_usage
from node_daemon.usage.store import USAGE_FILE, UsageStore
from tests.node_daemon.test_usage import rows

TEAMS = {"ml": ("alice", "bob"), "vision": ("bob",)}
TODAY = dt.date(2024, 6, 30)


def teams_of(user: str) -> tuple[str, ...]:
    return tuple(f"team:{team}" for team, members in TEAMS.items() if user in members)


def ms(day: str, hour: int = 12, second: float = 0.0) -> int:
    moment = dt.datetime.fromisoformat(day).replace(hour=hour, tzinfo=dt.UTC)
    return int((moment.timestamp() + second) * 1000)


def workload(owner: str, day: str, wait_s: float | None) -> pb.Workload:
    record = pb.Workload(id=f"w-{owner}-{day}", owner=owner, queued_unix_ms=ms(day))
    if wait_s is not None:
        record.started_unix_ms = ms(day, second=wait_s)
    return record


@pytest.fixture
def store(tmp_path: Path) -> Iterator[UsageStore]:
    usage = UsageStore(tmp_path / USAGE_FILE)
    usage.add(
        {
            ("2024-06-01", "alice"): UsageAmounts(gpu_seconds=3600, energy_joules=1e6),
            ("2024-06-01", "bob"): UsageAmounts(gpu_seconds=1800),
            ("2024-06-02", "carol"): UsageAmounts(gpu_seconds=900),
            ("2024-06-02", "team:ml"): UsageAmounts(
                reserved_seconds=7200, reserved_idle_seconds=3600
            ),
        },
        {
            "2024-06-01": NodeAmounts(gpu_seconds=8 * 86400, busy_gpu_seconds=2 * 86400,
                                      allocated_seconds=1000, allocated_idle_seconds=250),
            "2024-06-02": NodeAmounts(gpu_seconds=8 * 86400, busy_gpu_seconds=0,
                                      allocated_seconds=1000, allocated_idle_seconds=750),
        },
    )  # fmt: skip
    yield usage
    usage.close()


WORKLOADS = [
    workload("alice", "2024-06-01", 10.0),
    workload("alice", "2024-06-02", 30.0),
    workload("bob", "2024-06-02", 20.0),
    workload("carol", "2024-06-03", 40.0),
    workload("dave", "2024-06-02", None),  # still queued: not started, not counted
]


def query(store: UsageStore, by: int, **period: str) -> pb.QueryUsageResponse:
    request = pb.QueryUsageRequest(group_by=by, **period)
    return query_usage(store, WORKLOADS, teams_of, request, "gpu-node-7", TODAY)


def test_by_user_heaviest_first_with_workloads(store: UsageStore) -> None:
    response = query(store, pb.USAGE_GROUPING_USER)
    assert [r.key for r in response.rows] == ["alice", "bob", "carol", "team:ml"]
    users = rows(response)
    assert users["alice"].gpu_seconds == 3600
    assert users["alice"].workloads == 2
    assert users["bob"].workloads == 1
    assert users["team:ml"].reserved_idle_seconds == 3600
    assert response.node == "gpu-node-7"


def test_unspecified_grouping_is_by_user(store: UsageStore) -> None:
    assert (
        rows(query(store, pb.USAGE_GROUPING_UNSPECIFIED)).keys()
        == rows(query(store, pb.USAGE_GROUPING_USER)).keys()
    )


def test_by_team_counts_a_user_for_each_team(store: UsageStore) -> None:
    teams = rows(query(store, pb.USAGE_GROUPING_TEAM))
    assert teams["team:ml"].gpu_seconds == 3600 + 1800
    assert teams["team:ml"].reserved_seconds == 7200  # the team's own reservation
    assert teams["team:vision"].gpu_seconds == 1800
    assert teams[NO_TEAM].gpu_seconds == 900
    assert teams["team:ml"].workloads == 3
    assert teams[NO_TEAM].workloads == 1


def test_by_node_is_one_row(store: UsageStore) -> None:
    response = query(store, pb.USAGE_GROUPING_NODE)
    assert [r.key for r in response.rows] == ["gpu-node-7"]
    assert response.rows[0].gpu_seconds == 3600 + 1800 + 900
    assert response.rows[0].workloads == 4


def test_by_day_in_day_order(store: UsageStore) -> None:
    response = query(store, pb.USAGE_GROUPING_DAY)
    assert [r.key for r in response.rows] == ["2024-06-01", "2024-06-02", "2024-06-03"]
    assert response.rows[0].gpu_seconds == 5400
    assert response.rows[2].gpu_seconds == 0  # a workload started, nothing recorded
    assert response.rows[2].workloads == 1


def test_period_limits_rows_workloads_and_kpis(store: UsageStore) -> None:
    response = query(store, pb.USAGE_GROUPING_USER, from_day="2024-06-02", to_day="2024-06-02")
    users = rows(response)
    assert set(users) == {"alice", "bob", "carol", "team:ml"}
    assert users["alice"].gpu_seconds == 0
    assert users["alice"].workloads == 1
    assert response.kpis.mean_utilisation_pct == 0
    assert response.kpis.idle_allocated_share == pytest.approx(0.75)
    assert response.kpis.wait_p50_s == pytest.approx(25.0)


def test_kpis_over_the_whole_period(store: UsageStore) -> None:
    kpis = query(store, pb.USAGE_GROUPING_USER).kpis
    assert kpis.gpu_seconds_total == 16 * 86400
    assert kpis.mean_utilisation_pct == pytest.approx(12.5)
    assert kpis.idle_allocated_share == pytest.approx(0.5)
    # Waits 10, 20, 30, 40 s: p50 25 s, p90 37 s (linear interpolation).
    assert kpis.wait_p50_s == pytest.approx(25.0)
    assert kpis.wait_p90_s == pytest.approx(37.0)


def test_the_ends_of_the_calendar_are_a_period_like_any_other(store: UsageStore) -> None:
    # 9999-12-31 has no next day (it raised "date value out of range": UNKNOWN), and
    # a period from year 1 must not make a list of its days (test_fuzz found both ends).
    whole = query(store, pb.USAGE_GROUPING_USER, from_day="2024-01-01", to_day="2024-12-31")
    widest = query(store, pb.USAGE_GROUPING_USER, from_day="0001-01-01", to_day="9999-12-31")
    assert whole.rows and list(widest.rows) == list(whole.rows)
    assert (
        query(store, pb.USAGE_GROUPING_DAY, to_day="9999-12-31").rows
        == query(store, pb.USAGE_GROUPING_DAY, from_day="2024-06-01", to_day="2024-06-30").rows
    )


def test_an_empty_period_answers_zeros(store: UsageStore) -> None:
    response = query(store, pb.USAGE_GROUPING_USER, from_day="2023-01-01", to_day="2023-01-31")
    assert not response.rows
    assert response.kpis == pb.UsageKpis()


@pytest.mark.parametrize(
    ("from_day", "to_day", "message"),
    [
        ("2024-6-1", "", "from_day must be a day like"),
        ("yesterday", "", "from_day must be a day like"),
        ("", "2024-02-30", "to_day must be a day like"),
        ("20240601", "", "from_day must be a day like"),
        ("2024-06-02", "2024-06-01", "is after to_day"),
    ],
)
def test_bad_periods_are_refused(from_day: str, to_day: str, message: str) -> None:
    with pytest.raises(BadUsageQuery, match=message):
        parse_period(from_day, to_day, TODAY)


def test_period_defaults() -> None:
    period = parse_period("", "", TODAY)
    assert (period.first, period.last) == (None, "2024-06-30")


def test_percentile() -> None:
    assert percentile([], 0.5) == 0
    assert percentile([7.0], 0.9) == 7.0
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 0.5) == 3.0
    assert percentile([5.0, 1.0], 0.9) == pytest.approx(4.6)
