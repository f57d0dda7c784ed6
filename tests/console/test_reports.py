"""Audit and usage reports, query rounds and roles: the plain-Python parts, without Qt."""

from __future__ import annotations

import csv
import io

import pytest

from console.connections.decode import decode_caller
from console.fleet.audit import AuditRow, audit_csv, merge_audit
from console.fleet.identity import Identity, role_refusal
from console.fleet.model import FleetModel
from console.fleet.query_round import QueryRound
from console.fleet.updates import IdentityUpdate, LinkState, LinkUpdate, QueryResult
from console.fleet.usage import NodeKpis, NodeUsage, UsageRow, fleet_kpis, merge_rows, usage_csv
from gpufleet.policy import Role
from gpufleet.v1 import node_pb2 as pb


def usage(target: str, rows: list[UsageRow], total: float, util: float, idle: float,
          p50: float, p90: float) -> NodeUsage:  # fmt: skip
    return NodeUsage(target, tuple(rows), NodeKpis(target, target, total, util, idle, p50, p90))


def test_rows_with_the_same_key_are_summed_across_nodes() -> None:
    a = usage("a", [UsageRow("alice", 100, 50, 10, 1000, 20, 5, 1), UsageRow("bob", 10)],
              3600, 50, 0.2, 10, 60)  # fmt: skip
    b = usage("b", [UsageRow("alice", 300, 100, 0, 500, 0, 0, 2)], 1200, 90, 0.6, 30, 40)
    rows = merge_rows([a, b], "user")
    assert rows == [UsageRow("alice", 400, 150, 10, 1500, 20, 5, 3), UsageRow("bob", 10)]
    days = merge_rows([usage("a", [UsageRow("2024-06-02", 1), UsageRow("2024-06-01", 9)],
                             0, 0, 0, 0, 0)], "day")  # fmt: skip
    assert [r.key for r in days] == ["2024-06-01", "2024-06-02"]  # days in order, not by weight


def test_fleet_kpis_weight_by_observed_gpu_time_and_keep_the_worst_wait() -> None:
    a = usage("a", [], 3600, 50, 0.2, 10, 60)
    b = usage("b", [], 1200, 90, 0.6, 30, 40)
    kpis = fleet_kpis([a, b])
    assert kpis.gpu_seconds_total == 4800
    assert kpis.mean_utilisation_pct == pytest.approx((50 * 3600 + 90 * 1200) / 4800)
    assert kpis.idle_allocated_share == pytest.approx((0.2 * 3600 + 0.6 * 1200) / 4800)
    assert (kpis.wait_p50_s, kpis.wait_p90_s) == (30, 60)
    assert "cannot be merged" in kpis.explanation() and "  b: 0.3 GPU-h" in kpis.explanation()
    assert fleet_kpis([usage("c", [], 0, 0, 0, 0, 0)]).mean_utilisation_pct == 0


def test_usage_csv_is_raw_units_with_the_grouping_as_column() -> None:
    text = usage_csv([UsageRow("ml", 7200.5, workloads=2)], "team")
    lines = list(csv.reader(io.StringIO(text)))
    assert lines[0][:3] == ["team", "gpu_seconds", "busy_gpu_seconds"]
    assert lines[1][:2] == ["ml", "7200.500"] and lines[1][lines[0].index("workloads")] == "2"
    assert lines[0][-5:] == ["cost", "gpu_cost", "energy_cost", "currency", "accounts"]
    assert lines[1][-5:] == ["", "", "", "", ""]  # no prices, no accounts


def audit_row(target: str, seq: int, time_ms: int, user: str = "ada") -> AuditRow:
    return AuditRow(target, seq, time_ms, user, "ipv4:127.0.0.1:5", "KillProcess", "pid=4",
                    '{"pid": 4}', "OK", "f" * 64)  # fmt: skip


def test_audit_pages_merge_newest_first_and_export() -> None:
    rows = merge_audit([[audit_row("a", 2, 2000), audit_row("a", 1, 1000)],
                        [audit_row("b", 7, 1500, "otto")]])  # fmt: skip
    assert [(r.target, r.seq) for r in rows] == [("a", 2), ("b", 7), ("a", 1)]
    lines = list(csv.DictReader(io.StringIO(audit_csv(rows, str.upper))))
    assert lines[1]["node"] == "B" and lines[1]["user"] == "otto"
    assert lines[0]["time_utc"] == "1970-01-01T00:00:02.000Z" and lines[0]["params"] == '{"pid": 4}'


def test_a_query_round_takes_only_its_own_answers() -> None:
    older, newer = QueryRound(), QueryRound()
    stale = older.expect("a")
    first, second = newer.expect("a", "user"), newer.expect("b", "user")
    assert not newer.take(QueryResult("a", "usage", stale, True, "done", "old"))
    assert newer.take(QueryResult("a", "usage", first, True, "done", "rows of a"))
    assert not newer.done
    assert newer.take(QueryResult("b", "usage", second, False, "UNAVAILABLE: gone"))
    assert newer.done and newer.payloads("user") == [("a", "rows of a")]
    newer.skipped["c"] = "unreachable"
    assert newer.problems(str.upper) == "C: unreachable; B: UNAVAILABLE: gone"


def test_roles_refuse_with_a_reason_and_unknown_refuses_nothing() -> None:
    otto = Identity("otto", Role.OPERATOR, ("ml",))
    assert role_refusal(otto, Role.OPERATOR, "n1") is None
    assert role_refusal(otto, Role.ADMIN, "n1") == "needs the admin role (otto is operator on n1)"
    assert role_refusal(None, Role.ADMIN, "n1") is None
    assert otto.may_act_for("team:ml") and not otto.may_act_for("vera")
    assert otto.describe() == "otto (operator; teams ml) by token"
    assert Identity("local", Role.ADMIN, (), "none").describe() == (
        "local (admin) without authentication"
    )
    unknown = decode_caller("n1", pb.Caller(user="x", role=pb.ROLE_UNSPECIFIED))
    assert unknown.identity.role is Role.VIEWER  # never more than the node said


def test_fleet_roles_follow_who_am_i_and_forget_on_denial() -> None:
    fleet = FleetModel()
    for target in ("a", "b"):
        fleet.add_node(target)
        fleet.apply(LinkUpdate(target, LinkState.CONNECTED))
    fleet.apply(IdentityUpdate("a", Identity("vera", Role.VIEWER)))
    fleet.apply(IdentityUpdate("b", Identity("vera", Role.ADMIN)))
    assert fleet.targets_with_role(Role.ADMIN) == ["b"]
    assert fleet.fleet_role_refusal(Role.OPERATOR) is None  # b allows it
    fleet.apply(LinkUpdate("b", LinkState.DENIED, "UNAUTHENTICATED: unknown token"))
    assert fleet.node("b").identity is None and fleet.targets_with_role(Role.ADMIN) == []
    assert fleet.fleet_role_refusal(Role.OPERATOR) == (
        "needs the operator role (vera is viewer on a)"
    )
