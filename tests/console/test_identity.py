"""Who the console is on each node (WhoAmI's Caller) and what the node's kill policy allows.

Without Qt: hand-built pb.Caller messages through the real decoder, the fleet
model and the pure verdicts; the expiry announcements on a fake clock.
"""

from __future__ import annotations

import dataclasses

from console.connections.decode import decode_caller
from console.fleet.control_requests import KillTarget
from console.fleet.credential_expiry import ExpiryAnnouncer, thresholds_ms
from console.fleet.durations import duration_text
from console.fleet.identity import Identity, expiry_text
from console.fleet.inventory import inventory_rows
from console.fleet.placement import can_kill
from console.fleet.process_row import ProcessRow
from console.fleet.updates import IdentityUpdate, LinkState, LinkUpdate
from gpufleet.policy import Role
from gpufleet.v1 import node_pb2 as pb
from tests.console.test_control_model import GIB, NOW, fleet_with, report

A, B = "10.0.0.1:50051", "10.0.0.2:50051"
MIN = 60_000
HOUR = 60 * MIN
JOB_PROCESS = ProcessRow(4242, "alice", "python train.py", GIB, NOW - 1000, None, "41000")


def caller(**fields: object) -> pb.Caller:
    base: dict[str, object] = dict(user="alice", role=pb.ROLE_OPERATOR, teams=["ml"],
                                   authenticated_by="jwt")  # fmt: skip
    return pb.Caller(**{**base, **fields})  # type: ignore[arg-type]


def identity(**fields: object) -> Identity:
    return decode_caller(A, caller(**fields)).identity  # type: ignore[return-value]


# -- decoding and words ---------------------------------------------------------------


def test_a_jwt_caller_decodes_with_its_issuer_expiry_and_the_kill_policy() -> None:
    who = identity(credential_expires_unix_ms=NOW + 6 * HOUR + 5 * MIN,
                   allow_kill_job_processes=True, token_issuer="https://sso.example.com",
                   token_id="jti-7")  # fmt: skip
    assert who == Identity("alice", Role.OPERATOR, ("ml",), "jwt", NOW + 6 * HOUR + 5 * MIN,
                           True, "https://sso.example.com", "jti-7")  # fmt: skip
    assert who.describe(NOW) == (
        "alice (operator; teams ml) by jwt from https://sso.example.com, expires in 6 h 5 min"
    )
    assert who.describe() == "alice (operator; teams ml) by jwt from https://sso.example.com"


def test_a_static_token_that_does_not_expire_and_refuses_job_kills_by_default() -> None:
    who = identity(authenticated_by="token", teams=[])
    assert who.expires_unix_ms is None and not who.allow_kill_job_processes
    assert who.describe(NOW) == "alice (operator) by token"  # no expiry: nothing said
    assert not who.expired(NOW + 100 * HOUR)


def test_spans_and_expiry_read_as_a_person_says_them() -> None:
    spans = (40, 14 * 60, 125 * 60, 6 * 3600 + 600, 3 * 86400 + 4 * 3600)
    words = ["40 s", "14 min", "2 h 5 min", "6 h 10 min", "3 d 4 h"]
    assert [duration_text(s) for s in spans] == words
    assert expiry_text(NOW + 14 * MIN, NOW) == "expires in 14 min"
    assert expiry_text(NOW - 3 * MIN, NOW) == "expired 3 min ago"


def test_the_inventory_says_who_we_are_and_until_when() -> None:
    fleet = fleet_with(A, B, gpus=1)
    fleet.apply(IdentityUpdate(A, identity(credential_expires_unix_ms=NOW + HOUR)))
    fleet.apply(IdentityUpdate(B, identity(authenticated_by="token")))
    rows = {r.target: r for r in inventory_rows(fleet)}
    assert rows[A].signed_in_as == "alice (operator; teams ml) by jwt"
    assert rows[A].credential_expires is not None and rows[A].credential_expires[:2] == "20"
    assert rows[B].credential_expires == "does not expire"


# -- the kill policy, exact -------------------------------------------------------------


def kill_verdict(allow: bool | None, process: ProcessRow = JOB_PROCESS, role: int = pb.ROLE_ADMIN):  # type: ignore[no-untyped-def]
    fleet = fleet_with(A)
    report(fleet, A, 2, processes=(process,))
    if allow is not None:
        fleet.apply(IdentityUpdate(A, identity(role=role, allow_kill_job_processes=allow)))
    return can_kill(KillTarget(A, "node-1", 2, process), fleet)


def test_a_slurm_job_process_is_refused_where_the_node_refuses_job_kills() -> None:
    verdict = kill_verdict(allow=False)
    assert not verdict.ok
    assert verdict.reason == (
        "node-1 refuses to kill processes of Slurm jobs (allow_kill_job_processes = false): "
        "pid 4242 belongs to Slurm job 41000; cancel it with scancel"
    )


def test_a_slurm_job_process_may_be_killed_where_the_node_allows_it() -> None:
    verdict = kill_verdict(allow=True)
    assert verdict.ok
    assert (
        verdict.reason
        == "kill pid 4242 (alice: python train.py) on node-1 GPU 2 of Slurm job 41000"
    )


def test_the_policy_concerns_job_processes_only_and_an_unknown_node_decides() -> None:
    plain = dataclasses.replace(JOB_PROCESS, slurm_job_id=None)
    assert kill_verdict(allow=False, process=plain).ok
    assert kill_verdict(allow=None).ok  # no WhoAmI yet (or an old daemon): the node decides


def test_ownership_is_judged_before_the_kill_policy_as_the_node_does() -> None:
    theirs = dataclasses.replace(JOB_PROCESS, user="bob")
    verdict = kill_verdict(allow=False, process=theirs, role=pb.ROLE_OPERATOR)
    assert not verdict.ok and verdict.reason.startswith("needs the admin role for pid 4242 of bob")


def test_a_denied_node_forgets_the_policy_with_the_identity() -> None:
    fleet = fleet_with(A)
    fleet.apply(IdentityUpdate(A, identity(allow_kill_job_processes=True)))
    fleet.apply(LinkUpdate(A, LinkState.DENIED, "UNAUTHENTICATED: token expired"))
    assert fleet.node(A).identity is None


# -- expiry announcements (fake clock) ----------------------------------------------------


def names_and(who: Identity, *names: str) -> list[tuple[str, Identity | None]]:
    return [(name, who) for name in names]


def test_an_hour_long_token_is_announced_at_15_and_2_minutes_and_at_expiry_once_each() -> None:
    expires = NOW + 8 * HOUR
    who = identity(credential_expires_unix_ms=expires, token_issuer="https://sso.example.com")
    nodes = names_and(who, "gpu-node-01", "gpu-node-02", "gpu-node-03", "gpu-node-04")
    announcer = ExpiryAnnouncer("prod", refreshes=False)
    said: list[tuple[int, str, str]] = []
    for now in range(NOW, expires + 2 * MIN, 10_000):  # every 10 s for 8 hours
        said += [(expires - now, n.title, n.body) for n in announcer.due(nodes, now)]
    assert [(left, title) for left, title, _ in said] == [
        (15 * MIN, "Token expires in 15 min"),
        (2 * MIN, "Token expires in 2 min"),
        (0, "Token expired 0 s ago"),
    ]
    assert said[0][2] == (
        "The token of profile prod (alice by jwt from https://sso.example.com) expires in 15 min "
        "on 4 nodes (gpu-node-01, gpu-node-02, gpu-node-03, …); sign in again: "
        "gpufleet console login --profile prod."
    )


def test_a_short_token_is_announced_at_the_same_shares_of_its_life() -> None:
    assert thresholds_ms(20 * MIN) == (5 * MIN, 40_000, 0)
    assert thresholds_ms(8 * HOUR) == (15 * MIN, 2 * MIN, 0)
    expires = NOW + 20 * MIN
    who = identity(credential_expires_unix_ms=expires)
    announcer = ExpiryAnnouncer("prod", refreshes=True)
    lefts = [expires - now for now in range(NOW, expires, 1000)
             for _ in announcer.due(names_and(who, "gpu-node-01"), now)]  # fmt: skip
    assert lefts == [5 * MIN, 40_000]


def test_a_token_first_seen_late_is_announced_once_at_once() -> None:
    expires = NOW + 90_000  # 1.5 min left of what was an 8-hour token
    announcer = ExpiryAnnouncer("prod", refreshes=True)
    who = identity(credential_expires_unix_ms=expires)
    first = announcer.due(names_and(who, "gpu-node-01"), NOW)
    assert [n.title for n in first] == ["Token expires in 1 min"] and first[0].urgent
    assert "the console asks token_command for a fresh one" in first[0].body
    assert announcer.due(names_and(who, "gpu-node-01"), NOW + 1000) == []


def test_credentials_are_announced_per_credential_not_per_node() -> None:
    soon, later = NOW + 14 * MIN, NOW + 8 * HOUR
    nodes = [(f"gpu-node-0{i}", identity(credential_expires_unix_ms=soon)) for i in range(1, 6)]
    nodes.append(("gpu-node-09", identity(credential_expires_unix_ms=later)))
    nodes.append(("gpu-node-10", identity(authenticated_by="token")))  # does not expire
    announcer = ExpiryAnnouncer("prod", refreshes=False)
    notices = announcer.due(nodes, NOW - 8 * HOUR)
    assert notices == []
    notices = announcer.due(nodes, NOW)
    assert len(notices) == 1 and "on 5 nodes" in notices[0].body


def test_a_refreshed_token_starts_its_own_announcements() -> None:
    announcer = ExpiryAnnouncer("prod", refreshes=True)
    old = identity(credential_expires_unix_ms=NOW + 10 * MIN)
    assert len(announcer.due(names_and(old, "n1"), NOW - 2 * HOUR)) == 0
    assert len(announcer.due(names_and(old, "n1"), NOW)) == 1  # 15-minute threshold passed
    new = identity(credential_expires_unix_ms=NOW + 8 * HOUR)
    assert announcer.due(names_and(new, "n1"), NOW + 1000) == []  # a fresh one: nothing to say
