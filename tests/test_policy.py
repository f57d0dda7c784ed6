"""Who may do what: one table, held against the shared rule (gpufleet.policy), against
the daemon where it enforces it, and against the console where it explains it first.

A row: the call, who asks (role, user, teams), about whom (a holder or owner, or a
process's user), the process's Slurm job and the node's allow_kill_job_processes,
and whether it is allowed.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from console.fleet.control_requests import KillTarget
from console.fleet.identity import Identity, role_refusal
from console.fleet.placement import can_kill
from console.fleet.process_row import ProcessRow
from console.fleet.updates import IdentityUpdate
from gpufleet import policy
from gpufleet.policy import Role, role_needed
from node_daemon.auth import interceptor
from node_daemon.auth.identity import Caller, reset_current_caller, set_current_caller
from node_daemon.backends.readings import ProcessReading
from node_daemon.control.kill_service import KillRefused, ProcessKiller
from node_daemon.errors import Forbidden
from node_daemon.rpc.control_servicer import ControlServicer, _may_kill
from tests.console.test_control_model import GIB, NOW, fleet_with, report

ADMIN, OPERATOR, VIEWER = Role.ADMIN, Role.OPERATOR, Role.VIEWER
ML = ("ml",)


@dataclass(frozen=True)
class Row:
    method: str
    role: Role
    user: str
    teams: tuple[str, ...]
    subject: str | None  # the holder or owner acted for; a process's user for KillProcess
    allowed: bool
    job: str = ""  # the process's Slurm job
    allow_jobs: bool = False  # the node's allow_kill_job_processes


TABLE = [
    # Acting for someone: themselves, their teams; an admin for anyone.
    Row("Reserve", OPERATOR, "alice", ML, "alice", True),
    Row("Reserve", OPERATOR, "alice", ML, "team:ml", True),
    Row("Reserve", OPERATOR, "alice", ML, "team:infra", False),
    Row("Reserve", ADMIN, "root", (), "team:infra", True),
    Row("ReleaseReservation", OPERATOR, "alice", ML, "bob", False),
    Row("ReleaseReservation", ADMIN, "root", (), "bob", True),
    Row("SubmitWorkload", OPERATOR, "alice", ML, "team:ml", True),
    Row("SubmitWorkload", OPERATOR, "alice", (), "team:alice", False),  # not a team of hers
    Row("AssignWorkload", OPERATOR, "alice", ML, "bob", False),
    Row("AssignWorkload", VIEWER, "alice", ML, "alice", False),  # the role first
    Row("CancelWorkload", OPERATOR, "bob", (), "bob", True),
    Row("CancelWorkload", OPERATOR, "bob", ML, "alice", False),
    # Killing: the process's own user or an admin; teams do not count.
    Row("KillProcess", OPERATOR, "alice", ML, "alice", True),
    Row("KillProcess", OPERATOR, "alice", ML, "bob", False),
    Row("KillProcess", OPERATOR, "alice", ML, "ml", False),
    Row("KillProcess", OPERATOR, "alice", ML, None, False),  # a process of no known user
    Row("KillProcess", ADMIN, "root", (), None, True),
    Row("KillProcess", VIEWER, "alice", (), "alice", False),
    # A Slurm job's process: only where the node allows it, whoever asks.
    Row("KillProcess", ADMIN, "root", (), "bob", False, job="41000"),
    Row("KillProcess", ADMIN, "root", (), "bob", True, job="41000", allow_jobs=True),
    Row("KillProcess", OPERATOR, "alice", (), "alice", False, job="41000"),
    Row("KillProcess", OPERATOR, "alice", (), "alice", True, job="41000", allow_jobs=True),
    Row("KillProcess", OPERATOR, "alice", (), "bob", False, job="41000", allow_jobs=True),
    # The role alone.
    Row("DrainGpu", OPERATOR, "alice", (), None, True),
    Row("DrainGpu", VIEWER, "alice", (), None, False),
    Row("ClearGpuHealth", OPERATOR, "alice", (), None, False),
    Row("ClearGpuHealth", ADMIN, "root", (), None, True),
    Row("QueryAudit", OPERATOR, "alice", ML, None, False),
    Row("CreateSilence", OPERATOR, "alice", (), None, True),
]
IDS = [f"{r.method}-{r.role.label}-{r.user}-{r.subject}-{r.job or 'nojob'}-{r.allow_jobs}"
       for r in TABLE]  # fmt: skip


@pytest.mark.parametrize("row", TABLE, ids=IDS)
def test_the_rule(row: Row) -> None:
    decided = policy.allowed(row.method, row.role, row.user, row.teams, row.subject,
                             row.job, row.allow_jobs)  # fmt: skip
    assert decided is row.allowed


# -- the daemon enforces it ------------------------------------------------------------


class _Listing:
    """A sampler that lists one process on GPU 0."""

    def __init__(self, process: ProcessReading) -> None:
        self._process = process

    def fresh_processes(self) -> dict[int, list[ProcessReading]]:
        return {0: [self._process]}


def _daemon_allows(row: Row) -> bool:
    caller = Caller(row.user, row.role, row.teams, "token")
    if caller.role < interceptor.METHOD_ROLES[row.method]:  # what the interceptor refuses
        return False
    token = set_current_caller(caller)
    try:
        if row.method == "KillProcess":
            process = ProcessReading(4242, GIB, NOW - 1000, row.subject, "python train.py",
                                     slurm_job_id=row.job or None)  # fmt: skip
            killer = ProcessKiller(_Listing(process), None, None, row.allow_jobs)  # type: ignore[arg-type]
            # As ProcessKiller.kill judges, short of the signal.
            killer.target(0, process.pid, NOW - 1000)
            _may_kill(process)  # Forbidden for another's process
            killer.refuse_job_process(process)  # KillRefused for a protected job's
        elif row.method in policy.OWNED_METHODS:
            assert row.subject is not None
            ControlServicer._require_holder(row.subject, "act")
    except (Forbidden, KillRefused):
        return False
    finally:
        reset_current_caller(token)
    return True


@pytest.mark.parametrize("row", TABLE, ids=IDS)
def test_the_daemon_enforces_the_rule(row: Row) -> None:
    assert _daemon_allows(row) is row.allowed


# -- the console explains it before asking ------------------------------------------------


def _console_allows(row: Row) -> bool:
    who = Identity(row.user, row.role, row.teams, allow_kill_job_processes=row.allow_jobs)
    if row.method == "KillProcess":
        target = "127.0.0.1:1"
        fleet = fleet_with(target)
        process = ProcessRow(4242, row.subject, "python train.py", GIB, NOW - 1000, None,
                             row.job or None)  # fmt: skip
        report(fleet, target, 2, processes=(process,))
        fleet.apply(IdentityUpdate(target, who))
        return can_kill(KillTarget(target, "node-1", 2, process), fleet).ok
    if role_refusal(who, role_needed(row.method), "node-1") is not None:
        return False
    return row.method not in policy.OWNED_METHODS or who.may_act_for(row.subject)


@pytest.mark.parametrize("row", TABLE, ids=IDS)
def test_the_console_explains_the_rule(row: Row) -> None:
    assert _console_allows(row) is row.allowed
