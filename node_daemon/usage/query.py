"""QueryUsage: the stored sums grouped by user, team, node, day or Slurm account, their
cost by the configured prices, plus the KPIs."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from gpufleet.policy import TEAM_PREFIX
from gpufleet.v1 import node_pb2 as pb
from node_daemon.errors import Invalid
from node_daemon.usage.amounts import USAGE_COLUMNS, NodeAmounts, TeamsOf, utc_day
from node_daemon.usage.bill import Cost, Piece, cost_of, job_time, pieces
from node_daemon.usage.settings import Prices
from node_daemon.usage.store import UsageStore

NO_TEAM = "(no team)"
NO_ACCOUNT_KEY = "(no account)"


class BadUsageQuery(Invalid):
    """A query that cannot be answered as asked; the message says what to fix."""


@dataclass(frozen=True)
class UsagePeriod:
    """Inclusive UTC days; `first` None means from the first day there is."""

    first: str | None
    last: str

    def contains(self, day: str) -> bool:
        return (self.first is None or self.first <= day) and day <= self.last

    def unix_range(self) -> tuple[float | None, float]:
        """[start of the first day, end of the last day) in Unix seconds, UTC."""

        def midnight(day: dt.date) -> float:
            return dt.datetime.combine(day, dt.time(), dt.UTC).timestamp()

        first = midnight(dt.date.fromisoformat(self.first)) if self.first else None
        # A day later in seconds, not in dates: the day after 9999-12-31 is no date.
        return first, midnight(dt.date.fromisoformat(self.last)) + 86_400.0


def parse_day(text: str, what: str) -> str:
    """A "YYYY-MM-DD" day, checked; BadUsageQuery otherwise."""
    try:
        day: dt.date | None = dt.date.fromisoformat(text)
    except ValueError:
        day = None
    if day is None or len(text) != len("YYYY-MM-DD"):
        raise BadUsageQuery(f"{what} must be a day like 2024-05-31 (UTC), got {text!r}")
    return day.isoformat()


def parse_period(from_day: str, to_day: str, today: dt.date) -> UsagePeriod:
    """The period of a request: empty from = from the start, empty to = today."""
    first = parse_day(from_day, "from_day") if from_day else None
    last = parse_day(to_day, "to_day") if to_day else today.isoformat()
    if first is not None and first > last:
        raise BadUsageQuery(f"from_day {first} is after to_day {last}")
    return UsagePeriod(first, last)


class KeyMapper:
    """Which row key(s) a user's usage on a day counts for, under a grouping."""

    def __init__(self, group_by: int, teams_of: TeamsOf, node: str) -> None:
        self._group_by, self._teams_of, self._node = group_by, teams_of, node

    def keys(self, day: str, user: str, account: str = "") -> Sequence[str]:
        if self._group_by == pb.USAGE_GROUPING_ACCOUNT:
            return (account or NO_ACCOUNT_KEY,)
        if self._group_by == pb.USAGE_GROUPING_DAY:
            return (day,)
        if self._group_by == pb.USAGE_GROUPING_NODE:
            return (self._node,)
        if self._group_by == pb.USAGE_GROUPING_TEAM:
            return self._team_keys(user)
        return (user,)

    def _team_keys(self, user: str) -> Sequence[str]:
        if user.startswith(TEAM_PREFIX):  # a team's own reservation time
            return (user,)
        return tuple(self._teams_of(user)) or (NO_TEAM,)


def percentile(values: Sequence[float], fraction: float) -> float:
    """Linear interpolation between closest ranks (numpy's default); 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    position = fraction * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def started_in(
    workloads: Iterable[pb.Workload], period: UsagePeriod
) -> list[tuple[str, pb.Workload]]:
    """(UTC start day, workload) for the workloads that started within the period."""
    started = (
        (utc_day(w.started_unix_ms / 1000), w) for w in workloads if w.HasField("started_unix_ms")
    )
    return [(day, w) for day, w in started if period.contains(day)]


def kpis(node_days: Iterable[NodeAmounts], waits_s: Sequence[float]) -> pb.UsageKpis:
    total = sum(node_days, NodeAmounts())
    return pb.UsageKpis(
        mean_utilisation_pct=_ratio(total.busy_gpu_seconds, total.gpu_seconds) * 100.0,
        idle_allocated_share=_ratio(total.allocated_idle_seconds, total.allocated_seconds),
        wait_p50_s=percentile(waits_s, 0.5),
        wait_p90_s=percentile(waits_s, 0.9),
        gpu_seconds_total=total.gpu_seconds,
    )


def _ratio(part: float, whole: float) -> float:
    return part / whole if whole > 0 else 0.0


def query_usage(
    store: UsageStore,
    workloads: Iterable[pb.Workload],
    teams_of: TeamsOf,
    request: pb.QueryUsageRequest,
    node: str,
    today: dt.date | None = None,
    prices: Prices | None = None,
    node_model: str = "",
) -> pb.QueryUsageResponse:
    """Answer a QueryUsage request from the store and the workload records. `node_model`:
    the GPU model the meter's usage is priced at (the node's)."""
    period = parse_period(request.from_day, request.to_day, today or dt.datetime.now(dt.UTC).date())
    mapper = KeyMapper(request.group_by, teams_of, node)
    started = started_in(workloads, period)
    waits = [(w.started_unix_ms - w.queued_unix_ms) / 1000.0 for _, w in started]
    node_days = (n for _, n in store.node_usage(period.first, period.last))
    parts = _pieces(store, period, node_model)
    groups = _group(parts, mapper, prices)
    rows = _rows(groups, _count(started, mapper), request.group_by, prices is not None)
    return pb.QueryUsageResponse(
        rows=rows, kpis=kpis(node_days, waits), node=node,
        currency=prices.currency if prices is not None else "",
    )  # fmt: skip


def _pieces(store: UsageStore, period: UsagePeriod, node_model: str) -> list[Piece]:
    jobs = store.jobs(*period.unix_range())
    metered = store.user_usage(period.first, period.last)
    return pieces(metered, job_time(jobs, period.contains, node_model), node_model)


@dataclass
class _Group:
    """One row's running sums: the amounts (USAGE_COLUMNS), then GPU cost and energy cost."""

    sums: list[float] = field(default_factory=lambda: [0.0] * (len(USAGE_COLUMNS) + 2))
    accounts: set[str] = field(default_factory=set)

    def add(self, values: tuple[float, ...]) -> None:
        sums = self.sums
        for i, value in enumerate(values):
            sums[i] += value


def _group(parts: Iterable[Piece], mapper: KeyMapper, prices: Prices | None) -> dict[str, _Group]:
    groups: dict[str, _Group] = {}
    for part in parts:
        cost = cost_of(part, prices) if prices is not None else Cost(0.0, 0.0)
        values = (*part.amounts.values(), cost.gpu, cost.energy)
        for key in mapper.keys(part.day, part.user, part.account):
            group = groups.get(key)
            if group is None:
                group = groups[key] = _Group()
            group.add(values)
            if part.account:
                group.accounts.add(part.account)
    return groups


def _count(started: Iterable[tuple[str, pb.Workload]], mapper: KeyMapper) -> dict[str, int]:
    counts: dict[str, int] = {}
    for day, workload in started:
        for key in mapper.keys(day, workload.owner):
            counts[key] = counts.get(key, 0) + 1
    return counts


def _rows(
    groups: Mapping[str, _Group], counts: Mapping[str, int], group_by: int, priced: bool
) -> list[pb.UsageRow]:
    rows = [
        _row(key, groups.get(key), counts.get(key, 0), priced)
        for key in groups.keys() | counts.keys()
    ]
    if group_by == pb.USAGE_GROUPING_DAY:
        return sorted(rows, key=lambda r: r.key)
    # Heaviest users first: the question a usage report is asked for.
    return sorted(rows, key=lambda r: (-r.gpu_seconds, r.key))


def _row(key: str, group: _Group | None, workloads: int, priced: bool) -> pb.UsageRow:
    group = group or _Group()
    *amounts, gpu_cost, energy_cost = group.sums
    row = pb.UsageRow(key=key, workloads=workloads, accounts=sorted(group.accounts),
                      **dict(zip(USAGE_COLUMNS, amounts, strict=True)))  # fmt: skip
    if priced:
        row.gpu_cost, row.energy_cost = gpu_cost, energy_cost
        row.cost = gpu_cost + energy_cost
    return row
