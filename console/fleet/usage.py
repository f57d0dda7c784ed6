"""Usage of the fleet: every node's QueryUsage answer merged into one report.

Rows with the same key (user, team, node, day or Slurm account) are summed across
nodes, their costs too where the nodes price in one currency: a node without prices
adds no cost, and nodes in different currencies give no sum (the row says "mixed").
KPIs are recomputed fleet-wide where the nodes' numbers allow it:

- GPU-seconds observed: the sum.
- Mean utilisation: exact, each node weighted by its GPU-seconds observed.
- Idle share of allocated or reserved time: each node weighted by its
  GPU-seconds observed (the nodes do not report their allocated time, so this
  is an approximation when nodes are allocated very differently).
- Workload wait p50/p90: percentiles cannot be merged from percentiles; the
  report shows the worst node's and lists every node's.

Plain Python: the Qt model, the charts and the CSV export read from here; the
request and the reply's decoding are console.connections' (queries, decode).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

# What a report can be grouped by: each is QueryUsage's USAGE_GROUPING_<NAME>.
GROUPINGS = ("user", "team", "node", "day", "account")
HOUR = 3600.0
MIXED = "mixed"  # the currency of a sum of costs in different currencies: none


@dataclass(frozen=True)
class UsageQuery:
    from_day: str = ""  # YYYY-MM-DD, UTC, inclusive; "" = from the first recorded day
    to_day: str = ""  # "" = today
    grouping: str = "user"


@dataclass(frozen=True)
class UsageRow:
    key: str  # the user, team, node, day or Slurm account
    gpu_seconds: float = 0.0
    busy_gpu_seconds: float = 0.0
    memory_gib_seconds: float = 0.0
    energy_joules: float = 0.0
    reserved_seconds: float = 0.0
    reserved_idle_seconds: float = 0.0
    workloads: int = 0
    # By the node's [usage.prices], in `currency`; None where it has none.
    cost: float | None = None
    gpu_cost: float | None = None
    energy_cost: float | None = None
    currency: str = ""
    accounts: tuple[str, ...] = ()  # the Slurm accounts charged

    def plus(self, other: UsageRow) -> UsageRow:
        sums = {name: getattr(self, name) + getattr(other, name) for name in AMOUNTS}
        currency = _currency(self.currency, other.currency)
        return replace(
            self, **sums, currency=currency,
            cost=_cost(self.cost, other.cost, currency),
            gpu_cost=_cost(self.gpu_cost, other.gpu_cost, currency),
            energy_cost=_cost(self.energy_cost, other.energy_cost, currency),
            accounts=tuple(sorted({*self.accounts, *other.accounts})),
        )  # fmt: skip


def _currency(a: str, b: str) -> str:
    return a if b in ("", a) else b if a == "" else MIXED


def _cost(a: float | None, b: float | None, currency: str) -> float | None:
    if currency == MIXED or (a is None and b is None):
        return None
    return (a or 0.0) + (b or 0.0)


AMOUNTS = ("gpu_seconds", "busy_gpu_seconds", "memory_gib_seconds", "energy_joules",
           "reserved_seconds", "reserved_idle_seconds", "workloads")  # fmt: skip
COSTS = ("cost", "gpu_cost", "energy_cost")


@dataclass(frozen=True)
class NodeKpis:
    target: str
    node: str  # the host name the daemon reports
    gpu_seconds_total: float
    mean_utilisation_pct: float
    idle_allocated_share: float
    wait_p50_s: float
    wait_p90_s: float


@dataclass(frozen=True)
class NodeUsage:
    target: str
    rows: tuple[UsageRow, ...]
    kpis: NodeKpis


def merge_rows(usages: Iterable[NodeUsage], grouping: str) -> list[UsageRow]:
    """Rows with the same key summed across nodes; days in order, else heaviest first."""
    merged: dict[str, UsageRow] = {}
    for usage in usages:
        for row in usage.rows:
            merged[row.key] = merged[row.key].plus(row) if row.key in merged else row
    if grouping == "day":
        return sorted(merged.values(), key=lambda r: r.key)
    return sorted(merged.values(), key=lambda r: (-r.gpu_seconds, r.key))


@dataclass(frozen=True)
class FleetKpis:
    gpu_seconds_total: float
    mean_utilisation_pct: float
    idle_allocated_share: float
    wait_p50_s: float  # the worst node's
    wait_p90_s: float  # the worst node's
    nodes: tuple[NodeKpis, ...]

    def text(self) -> str:
        return (f"{self.gpu_seconds_total / HOUR:,.1f} GPU-h observed · mean utilisation "
                f"{self.mean_utilisation_pct:.1f} % · idle share of allocated or reserved "
                f"{self.idle_allocated_share * 100:.1f} % · wait p50 ≤ {self.wait_p50_s:.0f} s, "
                f"p90 ≤ {self.wait_p90_s:.0f} s (worst node)")  # fmt: skip

    def explanation(self) -> str:
        """How each KPI was combined, and each node's own numbers (for a tooltip)."""
        lines = [
            "GPU-hours observed: the nodes' sum.",
            "Mean utilisation: each node weighted by its GPU-hours observed (exact).",
            "Idle share: each node weighted by its GPU-hours observed (the nodes do not report "
            "their allocated time, so this approximates the fleet-wide share).",
            "Wait p50/p90: percentiles of different nodes cannot be merged; shown is the worst "
            "node's. Per node:",
        ]
        for k in self.nodes:
            idle = k.idle_allocated_share * 100
            lines.append(f"  {k.node}: {k.gpu_seconds_total / HOUR:,.1f} GPU-h, "
                         f"{k.mean_utilisation_pct:.1f} %, idle {idle:.1f} %, "
                         f"wait p50 {k.wait_p50_s:.0f} s, p90 {k.wait_p90_s:.0f} s")  # fmt: skip
        return "\n".join(lines)


def fleet_kpis(usages: Sequence[NodeUsage]) -> FleetKpis:
    nodes = tuple(u.kpis for u in usages)
    total = sum(k.gpu_seconds_total for k in nodes)

    def weighted(value: str) -> float:
        if total <= 0:
            return 0.0
        return sum(getattr(k, value) * k.gpu_seconds_total for k in nodes) / total

    return FleetKpis(
        total, weighted("mean_utilisation_pct"), weighted("idle_allocated_share"),
        max((k.wait_p50_s for k in nodes), default=0.0),
        max((k.wait_p90_s for k in nodes), default=0.0), nodes,
    )  # fmt: skip


def top(rows: Sequence[UsageRow], count: int, value: str = "gpu_seconds") -> list[UsageRow]:
    """The `count` rows with the most of `value` (ties by key), leaving out zeros."""
    chosen = [r for r in rows if getattr(r, value) > 0]
    return sorted(chosen, key=lambda r: (-getattr(r, value), r.key))[:count]


CSV_VALUES = AMOUNTS


def usage_csv(rows: Sequence[UsageRow], grouping: str) -> str:
    """The export: one line per key, raw units (seconds, GiB·s, joules), like `gpufleet usage`,
    then cost, gpu_cost, energy_cost (empty without prices), currency and the accounts."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow([grouping, *CSV_VALUES, *COSTS, "currency", "accounts"])
    for row in rows:
        values = [getattr(row, name) for name in CSV_VALUES]
        costs = [getattr(row, name) for name in COSTS]
        writer.writerow([
            row.key, *(f"{v:.3f}" if isinstance(v, float) else v for v in values),
            *("" if c is None else f"{c:.4f}" for c in costs), row.currency, " ".join(row.accounts),
        ])  # fmt: skip
    return out.getvalue()


def currency_of(rows: Iterable[UsageRow]) -> str:
    """The one currency of these rows' costs, "" without prices, MIXED for several."""
    found = ""
    for row in rows:
        found = _currency(found, row.currency)
    return found
