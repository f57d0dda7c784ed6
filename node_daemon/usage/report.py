"""Usage reports for people (a table in hours and kWh) and for finance systems (CSV)."""

from __future__ import annotations

import csv
from collections.abc import Iterable
from typing import Literal, TextIO

from gpufleet.v1 import node_pb2 as pb
from node_daemon.usage.amounts import USAGE_COLUMNS

HOUR_S = 3600.0
KWH_J = 3.6e6
_HEADINGS = ("GPU-h", "busy GPU-h", "GiB-h", "kWh", "reserved h", "res. idle h", "workloads")
_DIVISORS = (HOUR_S, HOUR_S, HOUR_S, KWH_J, HOUR_S, HOUR_S)
CostColumn = Literal["cost", "gpu_cost", "energy_cost"]
COST_COLUMNS: tuple[CostColumn, ...] = ("cost", "gpu_cost", "energy_cost")
_COST_HEADINGS = ("cost", "GPU", "energy")


def _cells(row: pb.UsageRow) -> list[str]:
    values = (getattr(row, c) for c in USAGE_COLUMNS)
    return [f"{v / d:,.2f}" for v, d in zip(values, _DIVISORS, strict=True)] + [str(row.workloads)]


def _cost_cells(row: pb.UsageRow) -> list[str]:
    return [f"{getattr(row, c):,.2f}" if row.HasField(c) else "" for c in COST_COLUMNS]


def format_table(response: pb.QueryUsageResponse, key_heading: str) -> str:
    """The rows as an aligned text table (with their cost where the node has prices), then
    the KPIs."""
    currency = response.currency
    headings = [*_HEADINGS, *(f"{h} {currency}" for h in _COST_HEADINGS)] if currency else _HEADINGS
    body = ([r.key, *_cells(r), *(_cost_cells(r) if currency else [])] for r in response.rows)
    lines = _align([[key_heading, *headings], *body])
    if not response.rows:
        lines.append("(no usage recorded in this period)")
    return "\n".join([*lines, "", *format_kpis(response.kpis, response.node)])


def _align(table: list[list[str]]) -> list[str]:
    """Key column left-aligned, numbers right-aligned."""
    widths = [max(len(cells[i]) for cells in table) for i in range(len(table[0]))]
    return [
        "  ".join(
            [
                cells[0].ljust(widths[0]),
                *(c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True)),
            ]
        )
        for cells in table
    ]


def format_kpis(kpis: pb.UsageKpis, node: str) -> list[str]:
    return [
        f"node {node}: {kpis.gpu_seconds_total / HOUR_S:,.2f} GPU-h observed, "
        f"mean utilisation {kpis.mean_utilisation_pct:.1f} %",
        f"idle share of allocated or reserved GPU time: {kpis.idle_allocated_share * 100:.1f} %",
        f"workload wait (queued to started): p50 {kpis.wait_p50_s:,.0f} s, "
        f"p90 {kpis.wait_p90_s:,.0f} s",
    ]


CSV_TAIL = ("workloads", *COST_COLUMNS, "currency", "accounts")


def write_csv(
    out: TextIO,
    key_column: str | None,
    rows: Iterable[tuple[str, pb.UsageRow]],
    currency: str = "",
) -> None:
    """One line per (day, row): day[,key],gpu_seconds,...,workloads,cost,gpu_cost,
    energy_cost,currency,accounts; raw seconds and joules, costs empty without prices,
    accounts separated by spaces.

    With key_column "user" this is what `gpufleet usage import --csv` reads.
    """
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["day", *([key_column] if key_column else []), *USAGE_COLUMNS, *CSV_TAIL])
    for day, row in rows:
        key = [row.key] if key_column else []
        costs = [f"{getattr(row, c):.4f}" if row.HasField(c) else "" for c in COST_COLUMNS]
        writer.writerow(
            [day, *key, *(f"{getattr(row, c):.3f}" for c in USAGE_COLUMNS), row.workloads,
             *costs, currency if row.HasField("cost") else "", " ".join(row.accounts)]
        )  # fmt: skip
