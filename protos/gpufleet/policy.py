"""Who may do what on a node: one rule per action, for both sides.

The daemon reads these rules to enforce them (node_daemon.auth's interceptor,
node_daemon.rpc's servicers, node_daemon.control.kill_service); the console
reads the same rules to explain, before a drop or a dialog, what the node would
answer (console.fleet.identity, console.fleet.placement, the control prompts).
Each side words its own answer (the daemon's error, the console's verdict) from
the same decision, so the two cannot differ. The one test table is
tests/test_policy.py.

No I/O and no imports of either side: plain values in, a decision out.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence


class Role(enum.IntEnum):
    """A caller's role on a node (gpufleet.v1.Role): each allows what the ones below it do."""

    VIEWER = 1  # watch
    OPERATOR = 2  # acknowledge, silence, submit, reserve, assign, cancel, kill, drain: for
    # themselves and their teams
    ADMIN = 3  # everything, for anyone; the audit log; marking a GPU repaired

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Role:
        """A role by name, in any case of ASCII letters; ValueError for anything else.

        ASCII only: Unicode case rules make "adm\u0131n" (a dotless i) upper-case to
        ADMIN, so a name that merely looks like a role would grant it.
        """
        if not text.isascii():
            raise ValueError(f"role must be viewer, operator or admin (ASCII), got {text!r}")
        try:
            return cls[text.upper()]
        except KeyError:
            raise ValueError(f"role must be viewer, operator or admin, got {text!r}") from None


# -- who a caller is -----------------------------------------------------------------

# The one name of a caller on a node without authentication (a loopback demo): the node
# cannot tell such callers apart, so each is this admin. WhoAmI answers it, and every
# record of a change names it (an acknowledgement, a silence, a drain, a reservation's
# creator, the audit log); a caller with a credential is its credential's user instead.
# A request's `actor` field names no one: a caller never chooses the name it acts under.
LOCAL_USER = "local"


# -- the role each call needs --------------------------------------------------------

METHOD_ROLES: dict[str, Role] = {
    "GetInventory": Role.VIEWER,
    "StreamSamples": Role.VIEWER,
    "ListAlerts": Role.VIEWER,
    "StreamEvents": Role.VIEWER,
    "ListEvents": Role.VIEWER,
    "ListReservations": Role.VIEWER,
    "ListWorkloads": Role.VIEWER,
    "GetWorkloadOutput": Role.VIEWER,
    "WhoAmI": Role.VIEWER,
    "QueryUsage": Role.VIEWER,
    "ListSilences": Role.VIEWER,
    "GetHealth": Role.VIEWER,
    "QueryHistory": Role.VIEWER,
    "GetStateAt": Role.VIEWER,
    "AcknowledgeAlert": Role.OPERATOR,
    "SilenceAlert": Role.OPERATOR,
    "CreateSilence": Role.OPERATOR,
    "ExpireSilence": Role.OPERATOR,
    "SubmitWorkload": Role.OPERATOR,
    "AssignWorkload": Role.OPERATOR,
    "CancelWorkload": Role.OPERATOR,
    "Reserve": Role.OPERATOR,
    "ReleaseReservation": Role.OPERATOR,
    "KillProcess": Role.OPERATOR,
    "DrainGpu": Role.OPERATOR,
    # Writes its one audit record itself (the action was taken elsewhere): not in MUTATING.
    "RecordExternalAction": Role.OPERATOR,
    "QueryAudit": Role.ADMIN,
    # After a repair (a reset, an RMA): forgets what the daemon cannot see was fixed.
    "ClearGpuHealth": Role.ADMIN,
}
# The calls that change things: each is audited.
MUTATING = frozenset({
    "AcknowledgeAlert", "SilenceAlert", "CreateSilence", "ExpireSilence", "SubmitWorkload",
    "AssignWorkload", "CancelWorkload", "Reserve", "ReleaseReservation", "KillProcess",
    "DrainGpu", "ClearGpuHealth",
})  # fmt: skip


def role_needed(method: str) -> Role:
    """The role a NodeService call needs ("DrainGpu" -> OPERATOR); KeyError for no such call."""
    return METHOD_ROLES[method]


# -- acting for someone: reserve, release, submit, assign, cancel ------------------

TEAM_PREFIX = "team:"


def is_team(holder: str) -> bool:
    return holder.startswith(TEAM_PREFIX)


def team_name(text: str) -> str:
    """The team a group or team entry names: "ml" and "team:ml" are both team ml.

    Holders are "team:NAME" (holders()): an IdP group or a config entry already
    written as "team:ml" must not become the holder "team:team:ml".
    """
    return text.removeprefix(TEAM_PREFIX)


def holders(user: str, teams: Sequence[str]) -> tuple[str, ...]:
    """The names a caller may act for: itself and team:NAME of each of its teams."""
    return (user, *(f"{TEAM_PREFIX}{t}" for t in teams))


def may_act_for(role: Role, user: str, teams: Sequence[str], owner: str | None) -> bool:
    """Reserve, release, submit, assign or cancel for `owner`: an admin for anyone, an
    operator for itself and its teams (the call's own role is METHOD_ROLES')."""
    return role >= Role.ADMIN or (owner is not None and owner in holders(user, teams))


# -- killing a process ------------------------------------------------------------


def may_kill(role: Role, user: str, process_user: str | None) -> bool:
    """A process on a GPU: its owner (as the node lists it now) or an admin; a process of
    no known user only an admin. Teams do not count: a process runs as one account."""
    return role >= Role.ADMIN or (process_user is not None and process_user == user)


def job_process_protected(slurm_job_id: str | None, allow_job_processes: bool) -> bool:
    """A Slurm job's process is Slurm's to end (scancel): the node kills it only where its
    config allows (allow_kill_job_processes), whoever asks, an admin too."""
    return bool(slurm_job_id) and not allow_job_processes


# -- all of it, for one call -------------------------------------------------------

# The calls that act for someone (a reservation's holder, a workload's owner): the
# caller must be that someone, in one of its teams, or an admin.
OWNED_METHODS = frozenset({
    "Reserve", "ReleaseReservation", "SubmitWorkload", "AssignWorkload", "CancelWorkload",
})  # fmt: skip


def allowed(
    method: str,
    role: Role,
    user: str,
    teams: Sequence[str] = (),
    subject: str | None = None,
    slurm_job_id: str | None = None,
    allow_job_processes: bool = False,
) -> bool:
    """Whether `user` (`role`, `teams`) may make the call `method` about `subject`: the
    holder or owner it acts for (OWNED_METHODS), or the process's user (KillProcess),
    with the process's Slurm job and the node's allow_kill_job_processes."""
    if role < role_needed(method):
        return False
    if method == "KillProcess":
        protected = job_process_protected(slurm_job_id, allow_job_processes)
        return not protected and may_kill(role, user, subject)
    if method in OWNED_METHODS:
        return may_act_for(role, user, teams, subject)
    return True
