"""Hostile tokens against a real daemon with JWKS auth (issue #28: 2, 9, 11, 12).

Forged tokens whose kid or alg is new on every call must not each write an
audit record; a token whose JSON nests deeply is refused like any malformed
one; a long jti is revoked by its whole value; a role that only looks like
"admin" grants nothing; a group "team:ops" is the holder team:ops.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import replace
from pathlib import Path

import grpc
import pytest

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.auth.audit import AuditLog, verify
from node_daemon.auth.denials import (
    MAX_RECORDS,
    MAX_RECORDS_PER_USER,
    UNAUTHENTICATED,
    DenialLimiter,
)
from node_daemon.config import load_config_file, teams_of
from node_daemon.errors import ConfigError
from node_daemon.server import NodeDaemon
from tests.conftest import DaemonFactory, wait_for
from tests.node_daemon import test_jwt
from tests.node_daemon.jwt_mint import Issuer, b64, forged_kid_or_alg, part
from tests.node_daemon.reload_harness import more_than, open_streams
from tests.node_daemon.test_jwt import good, refusal, start, who, write_config

# test_jwt's fixtures: a daemon whose JWKS comes from its daemon.toml, and the keys' issuer.
daemon, issuer = test_jwt.daemon, test_jwt.issuer
CALLS = 3000
WHOAMI = "/gpufleet.v1.NodeService/WhoAmI"
DOTLESS_I = "\u0131"  # a dotless i: upper-cases to "I" by Unicode rules


def audit_bytes(path: Path) -> int:
    """The audit database and its WAL, as they lie on disk."""
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def deny_all(stub: pb_grpc.NodeServiceStub, tokens: list[str]) -> set[grpc.StatusCode]:
    codes = set()
    for token in tokens:
        try:
            stub.WhoAmI(pb.WhoAmIRequest(), timeout=5,
                        metadata=(("authorization", f"Bearer {token}"),))  # fmt: skip
        except grpc.RpcError as exc:
            codes.add(exc.code())
        else:
            raise AssertionError("a forged token was accepted")
    return codes


def test_forged_tokens_with_new_kids_and_algs_do_not_fill_the_audit_log(
    daemon: NodeDaemon, issuer: Issuer
) -> None:
    path = daemon.audit.path
    before_rows, before_bytes = daemon.audit.head[0], audit_bytes(path)
    with grpc.insecure_channel(str(daemon.address)) as channel:
        codes = deny_all(
            pb_grpc.NodeServiceStub(channel), [forged_kid_or_alg(n, good()) for n in range(CALLS)]
        )
    assert codes == {grpc.StatusCode.UNAUTHENTICATED}
    grown = audit_bytes(path) - before_bytes
    # One kind (this peer, WhoAmI, "invalid JWT"): one record in full, the rest counted.
    assert daemon.audit.head[0] - before_rows == 1 and grown < 64 * 1024, grown
    assert who(daemon, issuer.mint(good())).user == "alice"  # still serving, still right
    daemon.stop(grace_s=0.5)  # the summary of the repeats is written at stop
    records = AuditLog(path).query(method="WhoAmI")
    summary, first = records[0], records[-1]
    assert len(records) == 2 and "kid-0-" in first.result  # the first, as it was refused
    assert json.loads(summary.params)["repeats"] == CALLS - 1
    assert summary.result.startswith("DENIED: UNAUTHENTICATED: invalid JWT [2999 more like")
    assert "kid-" not in summary.result and "alg-" not in summary.result
    assert verify(path) == []


def test_denials_from_many_peers_are_bounded_per_interval_and_all_counted(
    tmp_path: Path,
) -> None:
    now = [1_000_000.0]
    audit = AuditLog(tmp_path / "audit.sqlite3", denials=DenialLimiter(), clock=lambda: now[0])
    intervals, peers = 3, 1000
    for _ in range(intervals):
        for n in range(peers):  # a new address and a new kid each time
            audit.record_denial("(unauthenticated)", f"ipv6:[2001:db8::{n:x}]:443", WHOAMI,
                                "", "{}", f"DENIED: UNAUTHENTICATED: JWT kid 'k{n}' is not in "
                                "this node's JWKS", "UNAUTHENTICATED: invalid JWT")  # fmt: skip
        now[0] += 61
    audit.close()
    written = AuditLog(tmp_path / "audit.sqlite3").query(limit=10_000)
    assert len(written) <= intervals * (2 * MAX_RECORDS + 1), len(written)
    counted = sum(json.loads(r.params).get("repeats", 1) for r in written)
    assert counted == intervals * peers  # bounded, yet nothing lost: every denial counted
    others = [json.loads(r.params) for r in written if r.peer == "(other peers)"]
    assert others and all(o["by_reason"] == {"UNAUTHENTICATED: invalid JWT": o["repeats"]}
                          for o in others)  # fmt: skip


def test_a_flood_without_credentials_does_not_crowd_out_a_known_users_denials(
    tmp_path: Path,
) -> None:
    """Anonymous callers share one budget; each authenticated user has their own, so what
    vera was refused during a flood from 1,000 addresses is still written in full."""
    now = [1_000_000.0]
    audit = AuditLog(tmp_path / "audit.sqlite3", denials=DenialLimiter(), clock=lambda: now[0])
    for n in range(1000):
        audit.record_denial(UNAUTHENTICATED, f"ipv6:[2001:db8::{n:x}]:443", WHOAMI, "", "{}",
                            "DENIED: UNAUTHENTICATED: no credentials",
                            "UNAUTHENTICATED: no credentials")  # fmt: skip
    methods = [f"/gpufleet.v1.NodeService/M{n}" for n in range(MAX_RECORDS_PER_USER + 5)]
    for method in methods:
        audit.record_denial("vera", "ipv4:10.0.0.7:5000", method, "", "{}",
                            f"DENIED: PERMISSION_DENIED: {method} needs the admin role",
                            "PERMISSION_DENIED: role too low")  # fmt: skip
    audit.close()
    written = AuditLog(tmp_path / "audit.sqlite3").query(limit=10_000)
    full = [r for r in written if not r.params.startswith('{"repeats"')]
    assert len([r for r in full if r.user == UNAUTHENTICATED]) == MAX_RECORDS
    assert [r.method for r in full if r.user == "vera"] == methods[:MAX_RECORDS_PER_USER][::-1]
    others = [json.loads(r.params) for r in written if r.peer == "(other peers)"]
    assert sum(o["repeats"] for o in others) == 1000 - MAX_RECORDS + 5  # all counted
    assert max(len(r.params) + len(r.result) + len(r.target) for r in written) < 2048
    assert verify(tmp_path / "audit.sqlite3") == []


def nested(depth: int) -> bytes:
    return b'{"sub": "alice", "x": ' + b"[" * depth + b"]" * depth + b"}"


@pytest.mark.parametrize("where", ["header", "payload"])
def test_deeply_nested_json_is_refused_without_a_traceback(
    daemon: NodeDaemon, caplog: pytest.LogCaptureFixture, where: str
) -> None:
    header = {"alg": "EdDSA", "kid": "ed-1"}
    head, body = (b64(nested(2000)), part(good())) if where == "header" else (
        part(header), b64(nested(2000))
    )  # fmt: skip
    token = f"{head}.{body}.{b64(b'x' * 64)}"
    with caplog.at_level(logging.DEBUG):
        for _ in range(20):
            details = refusal(daemon, token)
    assert details == f"malformed JWT: its {where} nests arrays or objects more than 32 levels deep"
    assert not [r for r in caplog.records if r.exc_info], caplog.text
    assert "RecursionError" not in caplog.text and "Traceback" not in caplog.text
    denials = [r for r in daemon.audit.query(method="WhoAmI") if r.user == "(unauthenticated)"]
    assert [r.result for r in denials] == [f"DENIED: UNAUTHENTICATED: {details}"]  # 19 counted


def test_brackets_inside_strings_do_not_count_as_nesting(daemon, issuer: Issuer) -> None:
    note = "[" * 100 + '\\"{' * 50  # an escaped quote does not end the string
    assert who(daemon, issuer.mint(good(note=note, deep=[[[["ok"]]]]))).user == "alice"


def test_a_long_jti_is_revoked_by_its_whole_value(
    start_daemon: DaemonFactory, tmp_path: Path, issuer: Issuer
) -> None:
    long_jti = "j" * 300 + "x" * 700  # 1,000 characters, as an IdP may issue
    daemon = start(start_daemon, write_config(tmp_path, issuer, f'revoked_jti = ["{long_jti}"]'))
    assert "revoked" in refusal(daemon, issuer.mint(good(jti=long_jti)))
    settings = daemon.auth_interceptor.settings
    daemon.auth_interceptor.reconfigure(replace(settings, revoked_jti=frozenset({"j" * 256})))
    reply = who(daemon, issuer.mint(good(jti=long_jti)))  # a revoked prefix revokes nothing
    assert reply.token_id == long_jti  # reported whole: copied to revoked_jti, it works


@pytest.mark.parametrize(
    "role",
    [f"adm{DOTLESS_I}n", f"v{DOTLESS_I}ewer", f"ADM{DOTLESS_I}N", ["viewer", f"adm{DOTLESS_I}n"]],
    ids=["admin", "viewer", "ADMIN", "list"],
)
def test_a_role_that_only_looks_like_one_is_refused(daemon, issuer: Issuer, role) -> None:
    details = refusal(daemon, issuer.mint(good(gpufleet_role=role)))
    assert "role must be viewer, operator or admin (ASCII)" in details


def test_a_config_role_must_be_ascii(tmp_path: Path) -> None:
    config = tmp_path / "daemon.toml"
    config.write_text(f'[[auth.users]]\nname = "eve"\nrole = "adm{DOTLESS_I}n"\n', "utf-8")
    with pytest.raises(ConfigError, match=r"role must be viewer, operator or admin \(ASCII\)"):
        load_config_file(config)


def test_a_group_named_team_ops_is_the_holder_team_ops(daemon, issuer: Issuer) -> None:
    wait_for(lambda: daemon.sampler.latest is not None)
    token = issuer.mint(good(groups=["team:ops", "/team:ml", "ml"]))
    assert list(who(daemon, token).teams) == ["ops", "ml"]
    until = int((time.time() + 3600) * 1000)
    with grpc.insecure_channel(str(daemon.address)) as channel:
        reply = pb_grpc.NodeServiceStub(channel).Reserve(
            pb.ReserveRequest(gpu_indices=[0], holder="team:ops", until_unix_ms=until),
            timeout=5, metadata=(("authorization", f"Bearer {token}"),),
        )  # fmt: skip
    assert (reply.holder, reply.created_by) == ("team:ops", "alice")
    assert daemon.auth_interceptor.jwt_teams_of("alice") == ("team:ops", "team:ml")


def test_config_teams_written_as_holders_are_team_names(tmp_path: Path) -> None:
    config = tmp_path / "daemon.toml"
    config.write_text('[[auth.users]]\nname = "otto"\nrole = "operator"\n'
                      'teams = ["team:ml", "ml", "vision"]\n', "utf-8")  # fmt: skip
    (otto,) = load_config_file(config).auth.users
    assert otto.teams == ("ml", "vision")


def test_a_teams_table_key_written_as_a_holder_is_the_team(tmp_path: Path) -> None:
    """[teams] "team:ops" = [...] is team ops (holder team:ops), merged with a plain "ops"."""
    config = tmp_path / "daemon.toml"
    config.write_text('[teams]\n"team:ops" = ["otto", "ada"]\nops = ["ada", "vera"]\n', "utf-8")
    loaded = load_config_file(config)
    assert loaded.teams == {"ops": ("otto", "ada", "vera")}
    assert teams_of(loaded, "vera") == teams_of(loaded, "otto") == ("team:ops",)


def test_a_stream_ends_when_its_token_expires_and_the_others_go_on(
    start_daemon: DaemonFactory, tmp_path: Path, issuer: Issuer
) -> None:
    """A console's streams stay open for days: one opened with a JWT that expires must end
    when a new call with it would be refused, not run on with a credential that is gone."""
    node = start(start_daemon, write_config(tmp_path, issuer, extra="leeway_s = 0"))
    soon = int(time.time()) + 3
    short, lasting = issuer.mint(good(exp=soon)), issuer.mint(good(user="bob"))
    with grpc.insecure_channel(str(node.address)) as channel:
        stub = pb_grpc.NodeServiceStub(channel)
        short_streams, other = open_streams(stub, short), open_streams(stub, lasting)
        try:
            wait_for(lambda: all(s.count() for s in (*short_streams, *other)), 10,
                     "every stream delivering")  # fmt: skip
            wait_for(lambda: all(s.error for s in short_streams), 15, "the short token's end")
            assert time.time() >= soon  # not before it expired
            for stream in short_streams:
                assert stream.error is not None
                assert stream.error.code() == grpc.StatusCode.UNAUTHENTICATED
                assert stream.error.details().startswith("JWT expired at ")
                assert stream.error.details().endswith("; stream ended")
            seen = other[0].count()
            wait_for(more_than(other[0], seen + 1), 10, "bob's stream delivering after")
            assert [s.error for s in other] == [None, None]
        finally:
            for stream in (*short_streams, *other):
                stream.close()
    ended = [r for r in node.audit.query(user="alice") if r.result.startswith("ENDED")]
    assert ended and all("expired" in r.result for r in ended)
