"""Denied calls are audited at a bounded rate: the first of a kind in full, repeats counted."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import grpc

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.auth.audit import AuditEntry, AuditLog, verify
from node_daemon.auth.denials import DenialLimiter, peer_host
from node_daemon.auth.settings import AuthSettings
from tests.conftest import DaemonFactory, wait_for
from tests.fake_clock import ManualClock
from tests.node_daemon.test_security import USERS

CALLS = 300
NO_TOKEN = "DENIED: UNAUTHENTICATED: no credentials"


def rows(path: Path) -> list[AuditEntry]:
    with sqlite3.connect(path) as db:
        return [AuditEntry(*r) for r in db.execute("SELECT * FROM audit ORDER BY seq")]


def test_a_client_without_a_token_cannot_fill_the_audit_log(start_daemon: DaemonFactory) -> None:
    node = start_daemon(gpus=1, auth=AuthSettings(USERS))
    wait_for(lambda: node.sampler.latest is not None)
    for channel_number in range(3):  # new connections: other ports, the same peer
        with grpc.insecure_channel(str(node.address)) as channel:
            stub = pb_grpc.NodeServiceStub(channel)
            for _ in range(CALLS // 3):
                try:
                    stub.GetInventory(pb.GetInventoryRequest(), timeout=5)
                except grpc.RpcError as exc:
                    assert exc.code() == grpc.StatusCode.UNAUTHENTICATED
                else:
                    raise AssertionError(f"an unauthenticated call passed ({channel_number})")
    written = rows(node.audit.path)
    assert [r.result.startswith(NO_TOKEN) for r in written] == [True], written
    node.stop(grace_s=0.5)  # the repeats of an unfinished interval are summed up at stop

    first, summary = rows(node.audit.path)
    assert first.user == summary.user == "(unauthenticated)"
    assert first.method == summary.method == "/gpufleet.v1.NodeService/GetInventory"
    assert json.loads(summary.params)["repeats"] == CALLS - 1
    assert summary.result.startswith(NO_TOKEN) and f"{CALLS - 1} more like record 1" in (
        summary.result
    )
    assert summary.peer == "ipv4:127.0.0.1"
    assert verify(node.audit.path) == []


def test_one_summary_per_kind_and_interval(tmp_path: Path) -> None:
    clock = ManualClock(1_000_000.0)
    audit = AuditLog(tmp_path / "audit.sqlite3", denials=DenialLimiter(interval_s=60), clock=clock)

    def deny(peer: str, user: str = "(unauthenticated)", why: str = NO_TOKEN) -> None:
        audit.record_denial(
            user, peer, "/m/GetInventory", "", "{}", why, why.removeprefix("DENIED: ")
        )

    for port in range(5):
        deny(f"ipv4:10.0.0.5:{4000 + port}")  # 1 written, 4 counted
    deny("ipv4:10.0.0.6:4000")  # another peer: its own kind
    deny("ipv4:10.0.0.5:4100", why="DENIED: UNAUTHENTICATED: unknown token")  # another reason
    assert [r.seq for r in audit.query()] == [3, 2, 1]
    clock.now += 61
    deny("ipv4:10.0.0.5:4200")  # the interval is over: a summary of 4, and this is counted
    written = sorted(audit.query(), key=lambda r: r.seq)
    assert [(r.peer, json.loads(r.params).get("repeats")) for r in written[3:]] == [
        ("ipv4:10.0.0.5", 4)
    ]
    clock.now += 61
    deny("ipv4:10.0.0.6:4001")  # that kind had no repeats: forgotten, so written in full
    audit.close()
    results = [(r.peer, r.result) for r in rows(tmp_path / "audit.sqlite3")]
    assert results[-2:] == [
        ("ipv4:10.0.0.5", f"{NO_TOKEN} [1 more like record 1 from ipv4:10.0.0.5, "
         f"{_utc(clock.now - 61)}..{_utc(clock.now - 61)} UTC]"),
        ("ipv4:10.0.0.6:4001", NO_TOKEN),
    ]  # fmt: skip
    assert verify(tmp_path / "audit.sqlite3") == []


def _utc(unix_s: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(unix_s))


def test_many_peers_share_one_kind_past_the_limit(tmp_path: Path) -> None:
    audit = AuditLog(tmp_path / "audit.sqlite3", denials=DenialLimiter(max_kinds=3))
    for n in range(50):
        audit.record_denial("(unauthenticated)", f"ipv6:[2001:db8::{n:x}]:443", "/m/M", "", "{}",
                            NO_TOKEN, "UNAUTHENTICATED: no credentials")  # fmt: skip
    audit.close()
    written = rows(tmp_path / "audit.sqlite3")
    # Three peers in full (all the kinds it remembers), then one summary of the others.
    assert len(written) == 4, [(r.peer, r.result) for r in written]
    assert json.loads(written[-1].params)["repeats"] == 47
    assert written[-1].peer == "(other peers)"


def test_peer_host_drops_only_the_port() -> None:
    assert peer_host("ipv4:10.0.0.5:51234") == "ipv4:10.0.0.5"
    assert peer_host("ipv6:[::1]:5000") == "ipv6:[::1]"
    assert peer_host("unix:/run/gpufleet.sock") == "unix:/run/gpufleet.sock"
